"""Sharding provenance (issue 36 item 3): XLA's involuntary full rematerializations as
remarks at the user's line, each held to the warning XLA prints when the same program
is compiled by JAX directly in a fresh process."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from sandbox.engine.core.rematerializations import rematerializations

MESH_2X4 = {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]}
#: a value constrained to one sharding (line 3) and then to one the partitioner cannot
#: reach with a collective (line 4)
REMAT_CODE = (
    "from jax.sharding import PartitionSpec as P\n"
    "def f(a):\n"
    "    b = jax.lax.with_sharding_constraint(jnp.sin(a), P(None, None, 'x'))\n"
    "    c = jax.lax.with_sharding_constraint(b, P(None, 'y', None))\n"
    "    return c * 3\n"
)


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def _xla_says(code: str, python: str = sys.executable) -> str:
    """What XLA writes to standard error compiling ``code``'s ``f`` over the same mesh,
    JAX (that of ``python``: any offered version) called directly in a fresh process."""
    script = textwrap.dedent(
        """
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
        import jax, jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec as P
        typed = hasattr(jax.sharding, "AxisType")
        auto = {"axis_types": (jax.sharding.AxisType.Auto,) * 2} if typed else {}
        mesh = jax.make_mesh((2, 4), ("x", "y"), **auto)
        # the ambient mesh bare PartitionSpecs refer to, as each JAX spells it
        if hasattr(jax, "set_mesh"):
            ambient = jax.set_mesh(mesh)
        elif hasattr(jax.sharding, "use_mesh"):
            ambient = jax.sharding.use_mesh(mesh)
        else:
            ambient = mesh
        """
    )
    script += code + textwrap.dedent(
        """
        a = jax.ShapeDtypeStruct((8, 8, 8), jnp.float32, sharding=NamedSharding(mesh, P()))
        with ambient:
            jax.jit(f).lower(a).compile()
        """
    )
    done = subprocess.run(
        [python, "-I", "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stderr


_SAID = re.compile(
    r"Involuntary full rematerialization\. The compiler (?:cannot|was not able to) go from "
    r"sharding (\{.*?\}) to (\{.*?\}) (?:efficiently|without doing)"
)


def test_an_involuntary_rematerialization_is_a_remark_at_its_line_with_both_shardings(
    run: Any,
) -> None:
    events = run(
        {
            "code": REMAT_CODE,
            "args": "(jnp.ones((8, 8, 8)),)",
            "backend": "cpu",
            "devices": 8,
            "mesh": MESH_2X4,
            "outputs": ["sharding", "remarks"],
            "timeout_s": 60,
        }
    )
    assert not _of(events, "error"), _of(events, "error")
    (event,) = _of(events, "sharding")
    (remat,) = event["rematerializations"]
    # the remarks output says it at the same line, with both shardings
    (remark,) = [r for r in _of(events, "remarks")[0]["items"] if r["kind"] == "rematerialization"]
    assert remark["line"] == remat["line"]
    assert remat["from_sharding"] in remark["message"] and remat["to_sharding"] in remark["message"]
    said = _SAID.search(_xla_says(REMAT_CODE))
    assert said is not None
    assert (remat["from_sharding"], remat["to_sharding"]) == (said.group(1), said.group(2))
    assert remat["from_sharding"] == "{mesh['x'=2,'y'=4], [{}, {}, {'x'}]}"
    assert remat["to_sharding"] == "{mesh['x'=2,'y'=4], [{}, {'y'}, {}]}"
    # the value rematerialized is the first constraint's (line 3), moved to the second's
    assert remat["line"] == 3
    assert remat["op_name"] == "jit(f)/sharding_constraint"
    # the collective that follows it: from the first constraint to the second
    (gather,) = event["collectives"]
    (source,) = gather["origin"]["from"]
    (target,) = gather["origin"]["to"]
    assert (source["kind"], source["line"], source["sharding"]) == (
        "constraint",
        3,
        "P(None, None, 'x')",
    )
    assert (target["kind"], target["line"], target["sharding"]) == (
        "constraint",
        4,
        "P(None, 'y', None)",
    )


def test_a_program_without_one_has_none(run: Any) -> None:
    events = run(
        {
            "code": "def f(a):\n    return jnp.sin(a) * 2\n",
            "args": "(jnp.ones((8, 8)),)",
            "backend": "cpu",
            "devices": 8,
            "mesh": MESH_2X4,
            "in_shardings": [["x", "y"]],
            "outputs": ["sharding", "remarks"],
            "timeout_s": 60,
        }
    )
    (event,) = _of(events, "sharding")
    assert event["rematerializations"] == []
    kinds = [r["kind"] for r in _of(events, "remarks")[0]["items"]]
    assert "rematerialization" not in kinds


# --- reading the log (no JAX) -------------------------------------------------------

_MODULE = (
    'HloModule m\n\nFileNames\n1 "snippet.py"\n\nFunctionNames\n1 "f"\n\n'
    "FileLocations\n1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=4 "
    "end_column=9}\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\n"
)


def test_both_spellings_of_the_warning_are_read() -> None:
    new = (
        "W1204 14:26:52.2 1 spmd_partitioner.cc:666] [SPMD] Involuntary full "
        "rematerialization. The compiler cannot go from sharding {devices=[1,1,2,4]"
        "<=[8] last_tile_dim_replicate} to {devices=[1,4,1,2]<=[2,4]T(1,0) "
        "last_tile_dim_replicate} efficiently for HLO operation %copy.1 = f32[8,8,4] "
        'copy(%sin), metadata={op_name="jit(f)/sharding_constraint" stack_frame_id=1}. '
        "As the last resort, SPMD will replicate the tensor.\n"
    )
    old = (
        "E1204 spmd_partitioner.cc:600] [spmd] Involuntary full rematerialization. The "
        "compiler was not able to go from sharding {devices=[2,1]0,1} to {devices=[1,2]0,1}"
        " without doing a full rematerialization of the tensor for HLO operation: "
        '%add = f32[4,4] add(%a, %b), metadata={op_name="jit(f)/add" '
        'source_file="snippet.py" source_line=5}. You probably want to enrich the '
        "sharding annotations to prevent this from happening.\n"
    )
    first, second = rematerializations("noise\n" + new + old, _MODULE)
    assert first["line"] == 7 and first["op_name"] == "jit(f)/sharding_constraint"
    assert first["from_sharding"] == "{devices=[1,1,2,4]<=[8] last_tile_dim_replicate}"
    assert first["to_sharding"] == "{devices=[1,4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
    assert second["line"] == 5 and second["op_name"] == "jit(f)/add"
    assert (second["from_sharding"], second["to_sharding"]) == (
        "{devices=[2,1]0,1}",
        "{devices=[1,2]0,1}",
    )
    assert rematerializations("no warning here\n", _MODULE) == []


# --- which sharding forced each collective (Shardy's sharding origins) ---------------

MESH_4 = {"shape": [4], "axis_names": ["x"], "axis_types": ["auto"]}
#: an argument split over its rows, summed cumulatively down them: its sharding forces
#: an all-gather
ARGUMENT_CODE = "def f(a):\n    return jnp.cumsum(a, axis=0)\n"
#: a constraint that splits the columns of a value whose rows are split
CONSTRAINT_CODE = (
    "from jax.sharding import PartitionSpec as P\n"
    "def f(a):\n"
    "    b = jnp.sin(a)\n"
    "    return jax.lax.with_sharding_constraint(b, P(None, 'x'))\n"
)


def _sharding(run: Any, code: str) -> dict[str, Any]:
    events = run(
        {
            "code": code,
            "args": "(jnp.ones((8, 8)),)",
            "backend": "cpu",
            "devices": 4,
            "mesh": MESH_4,
            "in_shardings": [["x", None]],
            "outputs": ["sharding"],
            "timeout_s": 60,
        }
    )
    assert not _of(events, "error"), _of(events, "error")
    (event,) = _of(events, "sharding")
    return event


def _shardy_says(code: str) -> str:
    """The lowered module propagated by Shardy with sharding origins, JAX and its
    jaxlib's passes called directly in a fresh process."""
    script = textwrap.dedent(
        """
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
        import jax, jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
        from jax._src.interpreters import mlir
        from jax._src.lib.mlir import ir, passmanager
        mesh = jax.make_mesh((4,), ("x",), axis_types=(AxisType.Auto,))
        jax.set_mesh(mesh)
        """
    )
    script += code + textwrap.dedent(
        """
        a = jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=NamedSharding(mesh, P("x", None)))
        with mlir.make_ir_context():
            module = ir.Module.parse(jax.jit(f).lower(a).as_text())
            passmanager.PassManager.parse(
                "builtin.module(sdy-import-pipeline,"
                "sdy-user-priority-propagate{debug-sharding-origins=true})"
            ).run(module.operation)
            print(module)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout


def test_an_arguments_sharding_is_the_origin_of_the_all_gather_it_forces(run: Any) -> None:
    event = _sharding(run, ARGUMENT_CODE)
    assert event["origins_note"] is None
    (gather,) = [c for c in event["collectives"] if c["kind"] == "all-gather"]
    (source,) = gather["origin"]["from"]
    assert source == {
        "kind": "argument",
        "name": "a",  # the parameter's name, as JAX names the argument's location
        "line": 1,
        "sharding": "P('x', None)",
        "axes": ["x"],
    }
    # the cumulative sum cannot be split down its rows: nothing Shardy records asks
    # for the gathered layout
    assert gather["origin"]["to"] == [] and gather["origin"]["written"] is False
    said = _shardy_says(ARGUMENT_CODE)
    assert (
        'sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>, sdy.sharding_origins = {x = "self"}'
        in said
    )


def test_a_constraint_is_the_origin_of_the_reshard_it_forces(run: Any) -> None:
    event = _sharding(run, CONSTRAINT_CODE)
    (moved,) = event["collectives"]
    assert moved["kind"] == "all-to-all" and moved["line"] == 3
    (source,) = moved["origin"]["from"]
    (target,) = moved["origin"]["to"]
    assert (source["kind"], source["sharding"], source["line"]) == ("argument", "P('x', None)", 2)
    assert target == {
        "kind": "constraint",
        "name": "with_sharding_constraint",
        "line": 4,
        "sharding": "P(None, 'x')",
        "axes": ["x"],
    }
    # Shardy itself: the sine's rows keep the argument's axis; the constraint is its own
    said = _shardy_says(CONSTRAINT_CODE)
    assert re.search(r'stablehlo.sine .*sdy.sharding_origins = \[\{x = "input: 0"\}\]', said)
    assert re.search(
        r'sdy.sharding_constraint .*<@mesh, \[\{\}, \{"x"\}\]> \{sdy.sharding_origin_name = '
        r'"constraint_0", sdy.sharding_origins = \{x = "self"\}\}',
        said,
    )


def test_a_constraint_inside_a_nested_jit_is_found_through_the_call(run: Any) -> None:
    """The constraint lives in the called function's own func.func (Shardy keeps the
    call); what the call passed in is the argument's sharding."""
    code = (
        "from jax.sharding import PartitionSpec as P\n"
        "@jax.jit\n"
        "def inner(b):\n"
        "    return jax.lax.with_sharding_constraint(jnp.sin(b), P(None, 'x'))\n"
        "def f(a):\n"
        "    return inner(a * 2) + 1\n"
    )
    event = _sharding(run, code)
    (moved,) = event["collectives"]
    assert moved["kind"] == "all-to-all" and moved["line"] == 4
    assert [(o["kind"], o["line"]) for o in moved["origin"]["from"]] == [("argument", 5)]
    assert [(o["kind"], o["line"], o["sharding"]) for o in moved["origin"]["to"]] == [
        ("constraint", 4, "P(None, 'x')")
    ]


def _installed_versions() -> dict[str, Any]:
    import os
    from pathlib import Path

    from sandbox.environments.versions import installed

    root = Path(__file__).resolve().parents[2]
    folder = Path(os.environ.get("JAXPLAY_JAX_VERSIONS_DIR") or root / ".jaxplay" / "versions")
    return installed(folder)


@pytest.mark.slow
def test_every_installed_jax_says_its_origins_or_why_not_and_its_rematerializations() -> None:
    """One engine process per installed JAX version (its own interpreter, this
    checkout first on its path): Shardy's origins where it partitions (0.7+ by
    default), a note naming GSPMD where not; the rematerialization on every one."""
    import json
    from pathlib import Path

    from sandbox.protocol import RunRequest
    from sandbox.supervisor import worker_message
    from tests.gates import missing_requirement

    versions = _installed_versions()
    if not versions:
        missing_requirement(
            "no other JAX version installed", ".venv/bin/jaxplay versions add 0.6.2"
        )
    root = Path(__file__).resolve().parents[2]
    start = f"import sys, runpy; sys.path.insert(0, {str(root)!r}); "
    start += "runpy.run_module('sandbox.engine', run_name='__main__')"
    for version, env in sorted(versions.items()):
        typed = tuple(int(p) for p in version.split(".")[:2]) >= (0, 6)
        cases = [
            (CONSTRAINT_CODE, "(jnp.ones((8, 8)),)", MESH_4, [["x", None]], 4),
            (REMAT_CODE, "(jnp.ones((8, 8, 8)),)", MESH_2X4, None, 8),
        ]
        found = []
        for code, args, mesh, in_shardings, devices in cases:
            if not typed:  # axis types are JAX 0.6+; Auto is what older ones have
                mesh = {k: v for k, v in mesh.items() if k != "axis_types"}
            request = RunRequest.model_validate(
                {
                    "code": code,
                    "args": args,
                    "backend": "cpu",
                    "devices": devices,
                    "mesh": mesh,
                    "in_shardings": in_shardings,
                    "outputs": ["sharding"],
                    "timeout_s": 120,
                }
            )
            proc = subprocess.run(
                [env.python, "-I", "-c", start],
                input=worker_message(f"provenance-{version}", request),
                capture_output=True,
                timeout=300,
            )
            lines = proc.stdout.decode().splitlines()
            events = [json.loads(line) for line in lines if line.startswith("{")]
            assert not _of(events, "error"), (version, _of(events, "error"))
            found.append(_of(events, "sharding")[0])
        moved, remat = found
        shardy = tuple(int(p) for p in version.split(".")[:2]) >= (0, 7)
        (collective,) = moved["collectives"]
        if shardy:
            assert moved["origins_note"] is None, version
            assert [o["kind"] for o in collective["origin"]["to"]] == ["constraint"], version
            assert collective["origin"]["to"][0]["line"] == 4
        else:
            assert collective["origin"] is None, version
            assert "partitions with GSPMD" in moved["origins_note"], version
        (item,) = remat["rematerializations"]
        assert item["line"] == 3, version
        said = _SAID.search(_xla_says(REMAT_CODE, env.python))
        assert said is not None, version
        assert (item["from_sharding"], item["to_sharding"]) == said.groups(), version
