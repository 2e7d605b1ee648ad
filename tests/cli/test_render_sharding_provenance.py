"""How ``jaxplay run`` shows sharding provenance: under each collective the shardings
that forced it, the origins note, and XLA's rematerializations at their lines."""

from __future__ import annotations

from typing import Any

from backend.cli.render.events import render_event


def _collective(origin: Any, line: int) -> dict[str, Any]:
    return {"kind": "all-to-all", "bytes": 1024, "shape": "f32[4,8]", "replica_groups": [[0, 4]],
            "groups_text": "", "line": line, "hlo_line": 7, "origin": origin}  # fmt: skip


def test_origins_notes_and_rematerializations_are_said_under_the_collectives() -> None:
    argument = {"kind": "argument", "name": "a", "line": 18, "sharding": "P('x', None)"}
    constraint = {"kind": "constraint", "name": "with_sharding_constraint", "line": 20,
                  "sharding": "P(None, 'x')"}  # fmt: skip
    event = {
        "type": "sharding",
        "pipeline": "main",
        "devices": 8,
        "arguments": [],
        "outputs": [],
        "collectives": [
            _collective({"from": [argument], "to": [constraint], "written": False}, 19),
            _collective({"from": [], "to": [], "written": True}, 21),
            _collective(None, 22),
        ],
        "origins_note": "JAX 0.6.2 partitions with GSPMD",
        "rematerializations": [
            {
                "line": 20,
                "op_name": "jit(f)/sharding_constraint",
                "from_sharding": "{A}",
                "to_sharding": "{B}",
                "instruction": "",
                "message": "",
            },
        ],
    }
    lines = render_event(event).split("\n")
    assert lines[3] == (
        "      from argument a P('x', None) (line 18) -> to constraint "
        "with_sharding_constraint P(None, 'x') (line 20)"
    )
    assert lines[5] == "      the code's own collective: no sharding forced it"
    assert lines[7] == "  origins not reported: JAX 0.6.2 partitions with GSPMD"
    assert lines[8] == (
        "  involuntary full rematerialization at line 20 (jit(f)/sharding_constraint): "
        "from {A} to {B}"
    )
