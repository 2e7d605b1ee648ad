"""The sharding studio (issue 14): requests, the sharding output, sharding errors.

Runs go through a fresh worker (the real engine, the event gate) on 4 virtual CPU
devices; the texts and values of the sharding cases are also held to JAX run
directly by the golden corpus (tests/golden/cases/sharding_*.json).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sandbox.engine.outputs.sharding import _bytes, _groups, collectives
from sandbox.protocol import RunRequest

MESH = {"shape": [2, 2], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]}
MATMUL = "def f(x, w):\n    y = x @ w\n    return jnp.tanh(y)\n"
MATMUL_ARGS = "(jnp.arange(32.0).reshape(8, 4), jnp.ones((4, 2)))"


def _request(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"code": MATMUL, "args": MATMUL_ARGS, "backend": "cpu", "devices": 4}
    base.update(fields)
    base.setdefault("timeout_s", 60)
    return base


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


# --- the request ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"in_shardings": [["x"]]}, "in_shardings needs a `mesh`"),
        ({"mesh": MESH, "in_shardings": [["z"], None]}, "in_shardings[0] names ['z']"),
        ({"mesh": MESH, "out_shardings": [["x", "x"]]}, "out_shardings[0] uses a mesh axis twice"),
        ({"mesh": {"shape": [2], "axis_names": ["x", "y"]}}, "1 dimensions but 2 axis_names"),
        ({"mesh": {"shape": [2, 2], "axis_names": ["x", "x"]}}, "repeat a name"),
        ({"mesh": {"shape": [2], "axis_names": ["x"], "axis_types": ["sideways"]}}, "axis_types"),
        ({"lowering_platforms": ["tpu"]}, "drop ['value'] from outputs"),
        ({"transforms": [{"name": "shard_map", "out_specs": [["x"]]}]}, "needs a `mesh`"),
        ({"mesh": MESH, "transforms": [{"name": "shard_map"}]}, "needs `out_specs`"),
        (
            {"mesh": MESH, "transforms": [{"name": "shard_map", "out_specs": ["x"]}]},
            "transforms[0].out_specs must be a list of PartitionSpecs",
        ),
        ({"mesh": MESH, "transforms": [{"name": "smap"}]}, "needs `axis_name`"),
        ({"transforms": [{"name": "checkify", "errors": "every"}]}, "errors must be one or more"),
    ],
)
def test_a_bad_sharding_request_is_refused_naming_the_field(
    fields: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError) as info:
        RunRequest.model_validate({"code": "", "outputs": ["jaxpr", "value"], **fields})
    assert says in " ".join(f"{e['loc']} {e['msg']}" for e in info.value.errors())


def test_a_good_sharding_request_validates() -> None:
    request = RunRequest.model_validate(
        _request(
            mesh=MESH,
            in_shardings=[["x", "y"], [["x", "y"], None]],
            out_shardings=[None],
            transforms=[{"name": "shard_map", "in_specs": [["x"], None], "out_specs": [["x"]]}],
        )
    )
    assert request.mesh is not None and request.mesh.axis_names == ["x", "y"]


# --- reading collectives from HLO text (no JAX) ------------------------------------


@pytest.mark.parametrize(
    ("line", "groups"),
    [
        ("replica_groups={{0,1},{2,3}}, to_apply", [[0, 1], [2, 3]]),
        ("replica_groups=[2,2]<=[4], use_global", [[0, 1], [2, 3]]),
        ("replica_groups=[2,2]<=[2,2]T(1,0), use", [[0, 2], [1, 3]]),
        ("replica_groups=mesh['x'=2,'y'=2] {'x'}, dims", [[0, 2], [1, 3]]),
        ("replica_groups=mesh['x'=2,'y'=2] {'y'}, dims", [[0, 1], [2, 3]]),
        ("replica_groups=mesh['i'=4] {'i'}, use", [[0, 1, 2, 3]]),
        ("source_target_pairs={{0,1},{1,2},{2,3},{3,0}}", [[0, 1], [1, 2], [2, 3], [3, 0]]),
    ],
)
def test_every_spelling_of_replica_groups_is_read(line: str, groups: list[list[int]]) -> None:
    assert _groups(line)[0] == groups


def test_collectives_of_an_hlo_text_carry_kind_bytes_and_line() -> None:
    text = "\n".join(
        [
            "HloModule m",
            "FileNames",
            '1 "snippet.py"',
            "FunctionNames",
            '1 "f"',
            "FileLocations",
            "1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=1 end_column=1}",
            "StackFrames",
            "1 {file_location_id=1 parent_frame_id=1}",
            "",
            "ENTRY %main (p: f32[4,2]) -> f32[8,2] {",
            "  %p = f32[4,2]{1,0} parameter(0)",
            "  %ar = f32[4,2]{1,0} all-reduce(%p), replica_groups=[2,2]<=[4], "
            'metadata={op_name="x" stack_frame_id=1}',
            "  %rs = (f32[2]{0}, bf16[2]{0}) reduce-scatter-start(%ar), replica_groups={{0,1}}",
            "  ROOT %ag = f32[8,2]{1,0} all-gather(%ar), replica_groups=mesh['x'=2,'y'=2] {'x'}",
            "}",
        ]
    )
    found = collectives(text)
    assert [(c["kind"], c["bytes"], c["line"]) for c in found] == [
        ("all-reduce", 32, 7),
        ("reduce-scatter", 12, None),
        ("all-gather", 64, None),
    ]
    assert [c["hlo_line"] for c in found] == [13, 14, 15]
    assert _bytes("pred[3]{0}") == 3


# --- runs on 4 virtual devices -----------------------------------------------------


def test_a_sharded_matmul_shows_grids_and_its_all_reduce_at_the_matmul_line(run: Any) -> None:
    events = run(
        _request(
            mesh=MESH,
            in_shardings=[["x", "y"], ["y", None]],
            out_shardings=[[]],
            transforms=[{"name": "jit"}],
            outputs=["value", "sharding"],
        )
    )
    assert not _of(events, "error"), _of(events, "error")
    (event,) = _of(events, "sharding")
    assert event["devices"] == 4
    x, w = event["arguments"]
    assert x["spec"] == ["x", "y"] and x["shape"] == [8, 4]
    # x is split in 2 x 2 blocks, one per device; w's rows over y, replicated over x
    assert [(b["start"], b["stop"], b["devices"]) for b in x["grid"]] == [
        ([0, 0], [4, 2], [0]),
        ([0, 2], [4, 4], [1]),
        ([4, 0], [8, 2], [2]),
        ([4, 2], [8, 4], [3]),
    ]
    assert [b["devices"] for b in w["grid"]] == [[0, 2], [1, 3]]
    (out,) = event["outputs"]
    assert out["spec"] == [] and out["grid"] == [
        {"start": [0, 0], "stop": [8, 2], "devices": [0, 1, 2, 3]}
    ]
    kinds = {c["kind"]: c for c in event["collectives"]}
    # the contraction over y is summed across y's devices, at the line of `x @ w`
    assert kinds["all-reduce"]["line"] == 2
    assert kinds["all-reduce"]["replica_groups"] == [[0, 1], [2, 3]]
    assert kinds["all-reduce"]["bytes"] == 4 * 2 * 4
    # and the replicated output is gathered over x
    assert kinds["all-gather"]["replica_groups"] == [[0, 2], [1, 3]]


def test_shard_map_with_psum_runs_and_its_all_reduce_is_the_psum_line(run: Any) -> None:
    code = "def f(x):\n    total = lax.psum(x, 'i')\n    return x / total\n"
    events = run(
        _request(
            code=code,
            args="jnp.arange(1.0, 9.0)",
            mesh={"shape": [4], "axis_names": ["i"], "axis_types": ["explicit"]},
            in_shardings=[["i"]],
            transforms=[
                {"name": "shard_map", "in_specs": [["i"]], "out_specs": [["i"]]},
                {"name": "jit"},
            ],
            outputs=["value", "sharding"],
        )
    )
    assert not _of(events, "error"), _of(events, "error")
    (value,) = _of(events, "value")
    assert value["tree"][0]["shape"] == [8]
    (event,) = _of(events, "sharding")
    (psum,) = [c for c in event["collectives"] if c["kind"] == "all-reduce"]
    assert psum["line"] == 2 and psum["replica_groups"] == [[0, 1, 2, 3]]
    # the code's own collective: no sharding forced it (Shardy's module has it as a
    # stablehlo.all_reduce of its own)
    assert psum["origin"] == {"from": [], "to": [], "written": True}
    assert event["origins_note"] is None


def test_lowering_for_tpu_gives_its_stablehlo_on_a_cpu_worker(run: Any) -> None:
    events = run(
        _request(
            code="def f(x):\n    return jnp.sin(x) * 2\n",
            args="jnp.ones(4)",
            devices=1,
            lowering_platforms=["tpu"],
            outputs=["stablehlo"],
        )
    )
    assert not _of(events, "error"), _of(events, "error")
    (stablehlo,) = _of(events, "stablehlo")
    assert "stablehlo.sine" in stablehlo["text"]
    assert not [e for e in events if e["type"] == "stage" and e["stage"] == "compile"]


def _error(events: list[dict[str, Any]]) -> dict[str, Any]:
    errors = _of(events, "error")
    assert len(errors) == 1, errors
    return errors[0]


def test_an_explicit_axes_matmul_over_a_sharded_contraction_is_a_sharding_type_error(
    run: Any,
) -> None:
    events = run(
        _request(
            mesh={**MESH, "axis_types": ["explicit", "explicit"]},
            in_shardings=[["x", "y"], ["y", None]],
            outputs=["jaxpr"],
        )
    )
    error = _error(events)
    assert error["kind"] == "ShardingTypeError" and error["stage"] == "trace"
    assert error["line"] == 2  # y = x @ w
    assert "out_sharding" in error["hint"]
    assert error["doc_url"].endswith("notebooks/explicit-sharding.html")


def test_a_non_divisible_sharding_says_so(run: Any) -> None:
    events = run(
        _request(
            args="(jnp.ones((7, 4)), jnp.ones((4, 2)))",
            mesh=MESH,
            in_shardings=[["x", None], None],
            outputs=["jaxpr"],
        )
    )
    error = _error(events)
    assert error["stage"] == "args"
    assert "multiple of their size" in error["hint"]
    assert error["doc_url"] == "https://docs.jax.dev/en/latest/sharded-computation.html"


def test_a_mesh_bigger_than_the_devices_says_to_raise_devices(run: Any) -> None:
    events = run(_request(devices=2, mesh=MESH, outputs=["jaxpr"]))
    error = _error(events)
    assert error["stage"] == "args"
    assert "Raise `devices`" in error["hint"]


def test_shard_map_specs_that_do_not_match_explicit_arguments_say_how_to_fix(run: Any) -> None:
    events = run(
        _request(
            code="def f(x):\n    return x * 2\n",
            args="jnp.arange(8.0)",
            mesh={"shape": [4], "axis_names": ["i"], "axis_types": ["explicit"]},
            transforms=[{"name": "shard_map", "in_specs": [["i"]], "out_specs": [["i"]]}],
            outputs=["jaxpr"],
        )
    )
    error = _error(events)
    assert "in_shardings" in error["hint"]
    assert error["doc_url"].endswith("notebooks/shard_map.html")


def test_the_cli_spells_a_mesh_and_specs_compactly() -> None:
    from backend.cli.run import _parse_mesh, _parse_specs

    assert _parse_mesh("2x2:x,y") == {"shape": [2, 2], "axis_names": ["x", "y"]}
    assert _parse_mesh("4:i:explicit") == {
        "shape": [4],
        "axis_names": ["i"],
        "axis_types": ["explicit"],
    }
    assert _parse_mesh('{"shape": [2], "axis_names": ["d"]}') == {"shape": [2], "axis_names": ["d"]}
    assert _parse_specs("--in-sharding", ['["x", null]', "null"]) == [["x", None], None]
    assert _parse_specs("--in-sharding", None) is None


def test_abstract_arguments_carry_their_sharding(run: Any) -> None:
    events = run(
        _request(
            args="(jax.ShapeDtypeStruct((8, 4), jnp.float32), jax.ShapeDtypeStruct((4, 2), jnp.float32))",
            mesh=MESH,
            in_shardings=[["x", None], None],
            outputs=["stablehlo", "sharding"],
        )
    )
    assert not _of(events, "error"), _of(events, "error")
    (event,) = _of(events, "sharding")
    assert event["arguments"][0]["spec"] == ["x", None]
    (stablehlo,) = _of(events, "stablehlo")
    assert 'sdy.sharding<@mesh, [{"x"}, {}]>' in stablehlo["text"]
