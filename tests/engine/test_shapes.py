"""The ``shapes`` output (sandbox/engine/outputs/shapes.py): each expression's span and shape,
held to what JAX itself records (``jax.make_jaxpr`` and each equation's
``source_info``, in this process), on the warm engine."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax._src import source_info_util

from sandbox.engine.outputs.shapes import batch_positions
from sandbox.protocol.requests import SNIPPET_FILENAME

# ``ä`` is two bytes in UTF-8: Python's columns are byte offsets, the event's characters
CODE = """\
def f(x, w):
    ä = jnp.tanh(x @ w)
    return jnp.mean(ä ** 2, axis=-1)
"""
ARGS = "(jnp.ones((4, 3)), jnp.ones((3, 2)))"
BATCHED_ARGS = "(jnp.ones((5, 4, 3)), jnp.ones((3, 2)))"


def _jax_spans(closed: Any) -> dict[tuple[int, int, int, int], tuple[list[int], str]]:
    """Span (columns in characters) -> the last equation's output shape and dtype there,
    from JAX's own records."""
    lines = CODE.splitlines()
    spans: dict[tuple[int, int, int, int], tuple[list[int], str]] = {}
    for eqn in closed.jaxpr.eqns:
        frames = [
            fr
            for fr in source_info_util.user_frames(eqn.source_info.traceback)
            if fr.file_name == SNIPPET_FILENAME
        ]
        fr = frames[0]

        def chars(line: int, col: int) -> int:
            return len(lines[line - 1].encode()[:col].decode())

        key = (
            fr.start_line,
            chars(fr.start_line, fr.start_column),
            fr.end_line,
            chars(fr.end_line, fr.end_column),
        )
        spans[key] = (list(eqn.outvars[0].aval.shape), str(eqn.outvars[0].aval.dtype))
    return spans


def _f() -> Any:
    namespace: dict[str, Any] = {"jnp": jnp}
    exec(compile(CODE, SNIPPET_FILENAME, "exec"), namespace)
    return namespace["f"]


def _shapes(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert [e for e in events if e["type"] == "error"] == []
    (event,) = [e for e in events if e["type"] == "shapes"]
    return event


def _by_text(event: dict[str, Any], code: str = CODE) -> dict[str, dict[str, Any]]:
    lines = code.splitlines()
    return {
        lines[s["line"] - 1][s["col"] : s["end_col"]]: s
        for s in event["spans"]
        if s["line"] == s["end_line"]
    }


def test_each_expression_has_the_span_and_shape_jax_records(run: Any) -> None:
    event = _shapes(run({"code": CODE, "args": ARGS, "outputs": ["shapes"]}))
    expected = _jax_spans(jax.make_jaxpr(_f())(jnp.ones((4, 3)), jnp.ones((3, 2))))
    got = {
        (s["line"], s["col"], s["end_line"], s["end_col"]): (s["shape"], s["dtype"])
        for s in event["spans"]
    }
    assert event["source"] == "entry"
    assert got == expected
    by_text = _by_text(event)
    assert by_text["x @ w"]["shape"] == [4, 2]
    assert by_text["x @ w"]["primitive"] == "dot_general"
    # the mean's value is its last equation (the division), not the sum before it
    mean = by_text["jnp.mean(ä ** 2, axis=-1)"]
    assert (mean["shape"], mean["dtype"], mean["primitive"]) == ([4], "float32", "div")


def test_under_grad_the_shapes_are_the_forward_values(run: Any) -> None:
    code = CODE + "def g(x, w):\n    return jnp.sum(f(x, w))\n"
    transforms = [{"name": "grad", "argnums": 1}, {"name": "jit"}]
    request = {
        "code": code,
        "args": ARGS,
        "outputs": ["shapes"],
        "entry": "g",
        "transforms": transforms,
    }
    by_text = _by_text(_shapes(run(request)), code)
    # the backward pass's equations carry the same spans: a span's shape is still the value's
    assert by_text["x @ w"]["shape"] == [4, 2]
    assert by_text["jnp.tanh(x @ w)"]["shape"] == [4, 2]
    assert by_text["jnp.sum(f(x, w))"]["shape"] == []


def test_under_vmap_the_shape_is_per_example_with_the_batch_dimension(run: Any) -> None:
    request = {
        "code": CODE,
        "args": BATCHED_ARGS,
        "outputs": ["shapes", "jaxpr"],
        "transforms": [{"name": "vmap", "in_axes": [0, None]}],
    }
    event = _shapes(run(request))
    f, x, w = _f(), jnp.ones((5, 4, 3)), jnp.ones((3, 2))
    per_example = _jax_spans(jax.make_jaxpr(f)(x[0], w))
    batched = _jax_spans(jax.make_jaxpr(jax.vmap(f, in_axes=(0, None)))(x, w))
    assert event["source"] == "entry"
    for s in event["spans"]:
        key = (s["line"], s["col"], s["end_line"], s["end_col"])
        assert (s["shape"], s["dtype"]) == per_example[key]
        assert s["batched_shape"] == batched[key][0]
    matmul = _by_text(event)["x @ w"]
    assert (matmul["shape"], matmul["batched_shape"], matmul["batch_dims"]) == (
        [4, 2],
        [5, 4, 2],
        [0],
    )
    mean = _by_text(event)["jnp.mean(ä ** 2, axis=-1)"]
    assert (mean["shape"], mean["batched_shape"], mean["batch_dims"]) == ([4], [5, 4], [0])


def test_batch_positions_are_given_only_where_one_way_fits() -> None:
    assert batch_positions([5, 4, 2], [4, 2], [5]) == [(0,)]
    assert batch_positions([4, 5, 2], [4, 2], [5]) == [(1,)]
    assert batch_positions([5, 5], [5], [5]) == [(0,), (1,)]  # ambiguous: left out
    assert batch_positions([5, 4, 2], [4, 3], [5]) is None
    assert batch_positions([5, 3, 4], [4], [3, 5]) == [(0, 1)]


def test_under_a_mesh_each_value_has_its_partition_spec(run: Any) -> None:
    from jax.sharding import PartitionSpec as P

    mesh = {"shape": [2, 2], "axis_names": ["x", "y"], "axis_types": ["explicit", "explicit"]}
    request = {
        "code": "def f(x, w):\n    y = jnp.tanh(x @ w)\n    return y.sum(axis=1)\n",
        "args": "(jnp.ones((8, 4)), jnp.ones((4, 2)))",
        "backend": "cpu",
        "devices": 4,
        "mesh": mesh,
        "in_shardings": [["x", None], None],
        "outputs": ["shapes"],
    }
    spans = {(s["line"], s["col"]): s for s in _shapes(run(request))["spans"]}
    assert (spans[2, 17]["shape"], spans[2, 17]["sharding"]) == ([8, 2], str(P("x", None)))
    assert (spans[3, 11]["shape"], spans[3, 11]["sharding"]) == ([8], str(P("x")))


def test_spans_past_the_events_budget_are_cut_and_counted(monkeypatch: Any) -> None:
    from sandbox.engine.core.output import PipelineContext, Results, RunContext
    from sandbox.engine.core.pipeline import Pipeline
    from sandbox.engine.outputs import shapes
    from sandbox.protocol.events import ShapesEvent
    from sandbox.protocol.requests import RunRequest

    code = (
        "def f(x):\n"
        + "".join(f"    x = jnp.sin(x) + {i}.0\n" for i in range(10))
        + "    return x\n"
    )
    namespace: dict[str, Any] = {"jnp": jnp}
    exec(compile(code, SNIPPET_FILENAME, "exec"), namespace)
    f, args = namespace["f"], (jnp.ones(3),)
    request = RunRequest(code=code)
    context = RunContext(request, f, namespace, args, None, abstract=False)
    results = Results(PipelineContext(context, "main", [], Pipeline(f, "f")))
    results.closed = jax.make_jaxpr(f)(*args)
    whole = shapes.shapes_event(results)
    assert len(whole["spans"]) == 20 and whole["notes"] == []  # a sin and an add per line
    assert whole["spans_left_out"] == 0
    monkeypatch.setattr(shapes, "MAX_EVENT_VALUES", sum(map(shapes._nodes, whole["spans"][:5])))
    cut = shapes.shapes_event(results)
    assert cut["spans"] == whole["spans"][:5]
    assert cut["notes"] == ["15 more spans not shown"]
    assert cut["spans_left_out"] == 15
    ShapesEvent.model_validate(cut)
