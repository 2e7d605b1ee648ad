"""The value stepper (``trace_values``): the run's jaxpr stepped on its own arguments,
on the warm engine; its budgets on small ones, in this process."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.core import Literal

from sandbox.engine.core import jaxpr_walk as walk
from sandbox.engine.outputs.trace_values import ITERATIONS_SHOWN, Stepper
from sandbox.protocol.events import EVENT_ADAPTER

WHERE_SQRT = """import jax.numpy as jnp

def f(x):
    y = jnp.sqrt(x)
    return jnp.where(x > 0, y, 0.0)
"""
SQRT_LINE = 4


def _where_sqrt(x):
    y = jnp.sqrt(x)
    return jnp.where(x > 0, y, 0.0)


def trace_values(events, pipeline="main"):
    found = [e for e in events if e["type"] == "trace_values" and e["pipeline"] == pipeline]
    assert len(found) == 1, [e for e in events if e["type"] in ("error", "done")]
    assert events[-1]["status"] == "ok", events[-1]
    return found[0]


def test_the_nan_gradient_of_where_sqrt_points_at_the_div_and_the_mul(run) -> None:
    # JAX itself: the gradient at 0 is NaN
    assert np.isnan(jax.grad(_where_sqrt)(0.0))
    event = trace_values(
        run(
            {
                "code": WHERE_SQRT,
                "args": "0.0",
                "transforms": [{"name": "grad"}],
                "outputs": ["trace_values"],
            }
        )
    )
    rows = event["rows"]
    inf, nan = rows[event["first_inf"]], rows[event["first_nan"]]
    assert (inf["primitive"], inf["line"], inf["made"]) == ("div", SQRT_LINE, ["inf"])
    assert (nan["primitive"], nan["line"], nan["made"]) == ("mul", SQRT_LINE, ["nan"])
    assert inf["outputs"][0]["inf_count"] == 1 and nan["outputs"][0]["nan_count"] == 1
    # the Inf is made on the forward pass, the NaN on the backward pass, from that Inf
    assert (inf["phase"], nan["phase"]) == ("forward", "backward")
    assert event["first_inf"] in nan["inputs"]
    assert event["first_bad"] == event["first_inf"] < event["first_nan"]
    # nothing before the div held a NaN or an Inf
    for row in rows[: event["first_bad"]]:
        assert not any(o.get("nan_count") or o.get("inf_count") for o in row["outputs"]), row
    assert event["cut"] is None


STATS = """import jax.numpy as jnp

def f(x):
    y = jnp.sin(x) * 3.0
    n = jnp.sum(x > 0)
    return y - 1.0, n
"""


def test_stats_match_numpy(run) -> None:
    event = trace_values(
        run({"code": STATS, "args": "jnp.linspace(-3.0, 2.0, 11)", "outputs": ["trace_values"]})
    )
    x = np.asarray(jnp.linspace(-3.0, 2.0, 11))  # JAX's own (its middle element is not 0.0)
    by_primitive = {r["primitive"]: r for r in event["rows"]}
    expected = {
        "sin": (4, np.sin(x)),
        "mul": (4, np.sin(x) * np.float32(3.0)),
        "sub": (6, np.sin(x) * np.float32(3.0) - np.float32(1.0)),
    }
    for primitive, (line, values) in expected.items():
        (out,) = by_primitive[primitive]["outputs"]
        assert (out["shape"], out["dtype"]) == ([11], "float32")
        assert out["min"] == pytest.approx(values.min(), rel=1e-6)
        assert out["max"] == pytest.approx(values.max(), rel=1e-6)
        assert out["mean"] == pytest.approx(values.astype(np.float64).mean(), rel=1e-5, abs=1e-6)
        assert (out["nan_count"], out["inf_count"]) == (0, 0)
        assert by_primitive[primitive]["line"] == line and by_primitive[primitive]["phase"] is None
    (gt,) = by_primitive["gt"]["outputs"]
    assert (gt["dtype"], gt["min"], gt["max"]) == ("bool", 0, 1)
    assert gt["mean"] == pytest.approx((x > 0).mean())
    (count,) = by_primitive["reduce_sum"]["outputs"]
    assert count["min"] == count["max"] == int((x > 0).sum())
    assert "nan_count" not in count or count["nan_count"] is None  # not an inexact dtype


SCANS = """import jax.numpy as jnp
from jax import lax

def step(c, x):
    c = c * 0.5 + x
    return c, c * c

def f(short, long):
    a, _ = lax.scan(step, 0.0, short)
    b, ys = lax.scan(step, 0.0, long)
    return a + b + ys.sum()
"""


def test_a_short_scan_is_stepped_per_iteration_a_long_one_summarised(run) -> None:
    event = trace_values(
        run(
            {
                "code": SCANS,
                "args": "jnp.arange(3.0), jnp.arange(20.0)",
                "outputs": ["trace_values"],
            }
        )
    )
    rows = event["rows"]
    scans = [i for i, r in enumerate(rows) if r["primitive"] == "scan"]
    assert len(scans) == 2
    short = [r for r in rows[: scans[0]] if r["depth"] == 1]
    long = [r for r in rows[scans[0] + 1 : scans[1]] if r["depth"] == 1]
    # the short scan: each body equation once per iteration
    assert sorted({r["iteration"] for r in short}) == [0, 1, 2]
    assert all(r["iterations"] is None for r in short)
    # the long one (past ITERATIONS_SHOWN): one row per body equation, over 20 iterations
    assert ITERATIONS_SHOWN < 20
    assert long and all(r["iterations"] == 20 and r["iteration"] is None for r in long)
    # the carry c after each iteration, from JAX itself
    _, carries = lax.scan(lambda c, x: (c * 0.5 + x, c * 0.5 + x), 0.0, jnp.arange(20.0))
    carries = np.asarray(carries)
    (adds,) = [r for r in long if r["primitive"] == "add"]
    (out,) = adds["outputs"]
    assert out["min"] == pytest.approx(carries.min()) and out["max"] == pytest.approx(carries.max())
    assert out["mean"] == pytest.approx(carries.astype(np.float64).mean(), rel=1e-6)
    assert rows[scans[1]]["outputs"][1]["shape"] == [20]


def _loop(x):
    return lax.fori_loop(0, 50, lambda i, c: jnp.cos(c) + x, x)


def test_the_budgets_cut_and_say_so() -> None:
    x = jnp.ones((4,), jnp.float32)
    closed = jax.make_jaxpr(_loop)(x)
    whole = Stepper()
    whole.run(closed, [x])
    assert whole.cut is None
    for budget, reason in (
        ({"max_rows": 5}, "rows"),
        ({"max_steps": 30}, "steps"),
        ({"max_bytes": 200}, "bytes"),
    ):
        stepper = Stepper(**budget)
        stepper.run(closed, [x])
        event = stepper.event()
        EVENT_ADAPTER.validate_python(event)
        assert event["cut"] == reason and event["notes"], budget
        assert event["evaluated_steps"] < whole.steps, budget
    assert Stepper(max_rows=5).event()["rows"] == []
    small = Stepper(max_rows=5)
    small.run(closed, [x])
    assert len(small.event()["rows"]) <= 5


def test_a_compare_pipeline_is_stepped_only_when_asked(run) -> None:
    request = {
        "code": WHERE_SQRT,
        "args": "0.0",
        "transforms": [{"name": "grad"}],
        "compare": [[{"name": "grad"}, {"name": "jit"}]],
        "outputs": ["trace_values"],
        "timeout_s": 120,
    }
    events = run(request)
    main, compare = trace_values(events), trace_values(events, "0")
    assert main["rows"] and main["first_nan"] is not None
    assert compare["rows"] == [] and compare["first_bad"] is None
    assert compare["evaluated_steps"] == 0 and "trace_values_compare" in compare["notes"][0]
    # asked: the compare pipeline is stepped as the main one is (the same equations,
    # under jit's one more: the pjit holding them)
    from sandbox.engine.core.output import PipelineContext, Results, RunContext
    from sandbox.engine.outputs.trace_values import trace_values_results
    from sandbox.protocol import RunRequest

    class Pipe:
        fn = staticmethod(jax.jit(jax.grad(_where_sqrt)))
        static_argnums = ()

        def dynamic_args(self, args):
            return args

    for compare_too in (False, True):
        asked = RunRequest.model_validate({**request, "trace_values_compare": compare_too})
        context = RunContext(asked, _where_sqrt, {}, (0.0,), None, abstract=False)
        results = Results(PipelineContext(context, "0", asked.compare[0], Pipe()))  # type: ignore[arg-type]
        event = trace_values_results(results)
        event = {**event, "pipeline": "0"}
        EVENT_ADAPTER.validate_python(event)
        if not compare_too:
            assert event == compare
            continue
        # (lines: none here, where _where_sqrt is this file's, not the snippet's)
        steps = [(r["primitive"], r["made"]) for r in event["rows"]]
        assert steps[:-1] == [(r["primitive"], r["made"]) for r in main["rows"]]
        assert steps[-1][0] == "jit" and event["first_nan"] == main["first_nan"]


# --- a jaxpr longer than one compiled chunk (sandbox/engine/outputs/trace_values/segments.py) ---------

GROWING = """import jax.numpy as jnp
from jax import lax

def f(x):
    for i in range(13):
        x = lax.pad(jnp.sin(x) * 1.5, 0.0, [(0, 1, 0)]) + 0.5
    x = jnp.log(x - 10.0)
    for i in range(2):
        x = lax.pad(jnp.sin(x) * 1.5, 0.0, [(0, 1, 0)]) + 0.5
    return x
"""
GROWING_LOG_LINE = 7
REPEATING = """import jax.numpy as jnp

def f(x):
    for i in range(30):
        x = jnp.sin(x) * 1.5 + jnp.cos(x)
    return x
"""


def _snippet_f(code: str):
    scope: dict = {}
    exec(compile(code, "snippet.py", "exec"), scope)
    return scope["f"]


def _eager(fn, *args):
    """Each equation of ``fn``'s jaxpr bound by JAX, in order: (primitive, outputs),
    under one ``jax.jit`` returning them all (one compile, where binding each alone
    would compile each shape). The snippets' jaxprs hold no calls, loops or branches."""
    closed = jax.make_jaxpr(fn)(*args)

    def every_output(*values):
        env = dict(zip(closed.jaxpr.invars, values, strict=True))
        made = []
        for eqn in closed.jaxpr.eqns:
            ins = [v.val if isinstance(v, Literal) else env[v] for v in eqn.invars]
            out = eqn.primitive.bind(*ins, **eqn.params)
            outs = list(out) if eqn.primitive.multiple_results else [out]
            env.update(zip(eqn.outvars, outs, strict=True))
            made.append(outs)
        return made

    made = jax.jit(every_output)(*args)
    return [(eqn.primitive.name, outs) for eqn, outs in zip(closed.jaxpr.eqns, made, strict=True)]


def _assert_rows_are(rows, expected, prefix: str) -> None:
    assert len(rows) == len(expected)
    for n, (row, (primitive, outs)) in enumerate(zip(rows, expected, strict=True)):
        assert (row["eqn"], row["primitive"]) == (f"{prefix}{n}", primitive)
        for described, value in zip(row["outputs"], outs, strict=True):
            data = np.asarray(value)
            assert (described["shape"], described["dtype"]) == (list(data.shape), str(data.dtype))
            assert described["nan_count"] == int(np.isnan(data).sum()), (n, primitive)
            assert described["inf_count"] == int(np.isinf(data).sum()), (n, primitive)
            finite = data[np.isfinite(data)]
            for key, want in (("min", finite.min), ("max", finite.max), ("mean", finite.mean)):
                if finite.size:
                    assert described[key] == pytest.approx(float(want()), rel=1e-5, abs=1e-6)
                else:
                    assert described[key] is None


def test_a_long_jaxpr_is_planned_in_chunks_compiled_whole_or_bound_per_equation() -> None:
    from sandbox.engine.outputs import trace_values as tv
    from sandbox.engine.outputs.trace_values import segments

    def chunks(code: str):
        closed = jax.make_jaxpr(_snippet_f(code))(jnp.arange(3.0))
        flat = segments.flatten(
            closed.jaxpr, walk.call_jaxpr, walk.parts, walk.literal_type(), tv._eqn_cost
        )
        planned = segments.plan(flat, len(flat.steps), None, segments.Ops(walk.bind))
        return closed, planned.chunks

    # every equation a new one (the shape grows): chunks of at most 48, each compiled whole
    closed, growing = chunks(GROWING)
    assert len(closed.jaxpr.eqns) == 62
    assert [len(c.steps) for c in growing] == [segments.COMPILED_SEGMENT_MAX, 14]
    assert all(c.fn is not None for c in growing)
    # the same four equations again and again: bound one at a time, four compiles
    closed, repeating = chunks(REPEATING)
    assert len(closed.jaxpr.eqns) == 120 and len(repeating) == 3
    assert all(c.fn is None and len(c.ops) == len(c.steps) for c in repeating)


@pytest.mark.parametrize(
    ("code", "transforms"),
    [(GROWING, [{"name": "jit"}]), (REPEATING, [])],
    ids=["compiled-chunks-under-jit", "per-equation"],
)
def test_a_long_jaxpr_steps_as_jax_binds_each_equation(run, code, transforms) -> None:
    # (the growing one under jit: run eagerly, each of its shapes would compile)
    request = {"code": code, "args": "jnp.arange(3.0)", "transforms": transforms}
    event = trace_values(run({**request, "outputs": ["trace_values"], "timeout_s": 120}))
    expected = _eager(_snippet_f(code), jnp.arange(3.0))
    assert len(expected) > 48  # more than one chunk
    rows = event["rows"]
    if transforms:  # the jit's body, then the jit
        assert (rows[-1]["eqn"], rows[-1]["primitive"]) == ("0", "jit")
        rows = rows[:-1]
    _assert_rows_are(rows, expected, "0." if transforms else "")
    assert event["cut"] is None and event["evaluated_steps"] == len(event["rows"])
    if code is GROWING:  # the NaN is made in the second chunk, by the log
        first = next(n for n, (_, outs) in enumerate(expected) if np.isnan(outs[0]).any())
        assert first > 48 and expected[first][0] == "log"
        row = rows[first]
        assert event["first_nan"] == event["first_bad"] == first
        assert (row["primitive"], row["line"], row["made"]) == ("log", GROWING_LOG_LINE, ["nan"])
        assert row["inputs"] == [first - 1]
    else:
        assert event["first_bad"] is None


LOOPS = """import jax.numpy as jnp
from jax import lax

def f(xs):
    c, ys = lax.scan(lambda c, x: (c * 0.5 + x, jnp.sin(c) * x), 0.0, xs, reverse=True)
    n, v = lax.while_loop(lambda s: s[0] < 5, lambda s: (s[0] + 1, s[1] * 1.5), (0, c))
    return ys.sum() + v + n
"""


def test_a_loop_row_is_what_jax_computes_from_its_stepped_iterations(run) -> None:
    # a loop's outputs are its stepped iterations' (the last carry, the ys stacked)
    event = trace_values(
        run({"code": LOOPS, "args": "jnp.arange(12.0)", "outputs": ["trace_values"]})
    )
    xs = jnp.arange(12.0)
    c, ys = lax.scan(lambda c, x: (c * 0.5 + x, jnp.sin(c) * x), jnp.asarray(0.0), xs, reverse=True)
    n, v = lax.while_loop(lambda s: s[0] < 5, lambda s: (s[0] + 1, s[1] * 1.5), (0, c))
    top = {r["primitive"]: r for r in event["rows"] if r["depth"] == 0}
    for row, values in ((top["scan"], (c, ys)), (top["while"], (n, v))):
        for described, value in zip(row["outputs"], values, strict=True):
            data = np.asarray(value)
            assert described["shape"] == list(data.shape)
            assert described["min"] == pytest.approx(float(data.min()), rel=1e-6)
            assert described["max"] == pytest.approx(float(data.max()), rel=1e-6)
            assert described["mean"] == pytest.approx(float(data.mean()), rel=1e-6)
    assert event["cut"] is None and event["first_bad"] is None


def test_an_equation_bound_alone_compiles_once_for_weak_and_strong_inputs() -> None:
    # a literal or a weakly typed value, then a strongly typed one: the same compile
    # (a primitive's computation does not depend on its inputs' weak types)
    from jax import monitoring

    from sandbox.engine.outputs import trace_values as tv
    from sandbox.engine.outputs.trace_values import segments

    closed = jax.make_jaxpr(lambda x, y: x * y)(1.0, 2.0)  # weakly typed inputs
    flat = segments.flatten(
        closed.jaxpr, walk.call_jaxpr, walk.parts, walk.literal_type(), tv._eqn_cost
    )
    ops = segments.Ops(walk.bind)
    fn = ops.fn(flat.steps[0])
    weak = jnp.asarray(3.0)  # a weakly typed JAX array
    assert weak.weak_type
    expected = [float(weak * 1.5), 0.5, -4.0]  # (JAX's own compile, before counting)
    compiles: list[str] = []

    def listen(event: str, _secs: float, **_: object) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(event)

    monitoring.register_event_duration_secs_listener(listen)
    try:
        got = [
            float(fn(weak, 1.5)[0]),
            float(fn(np.float32(2.0), np.asarray(0.25, np.float32))[0]),
            float(fn(jnp.float32(-1.0), jnp.float32(4.0))[0]),
        ]
    finally:
        monitoring.unregister_event_duration_listener(listen)
    assert got == expected
    assert len(compiles) == 1, compiles
    assert ops.new(flat.steps) == 0


def test_stats_count_nans_and_infs_and_describe_the_finite_rest() -> None:
    from sandbox.engine.outputs.trace_values import stats

    data = np.array([1.0, np.nan, np.inf, -np.inf, 2.5, np.nan, -3.0], np.float32)
    described = stats(jnp.asarray(data))
    assert (described["nan_count"], described["inf_count"]) == (
        int(np.isnan(data).sum()),
        int(np.isinf(data).sum()),
    )
    finite = data[np.isfinite(data)]
    assert (described["min"], described["max"]) == (float(finite.min()), float(finite.max()))
    assert described["mean"] == pytest.approx(float(finite.astype(np.float64).mean()))
    # all of it NaN or Inf: counted, nothing to take a min of
    empty = stats(np.array([np.nan, np.inf], np.float32))
    assert (empty["nan_count"], empty["inf_count"]) == (1, 1) and "min" not in empty
    clean = stats(np.arange(4, dtype=np.float32))
    assert (clean["nan_count"], clean["inf_count"], clean["mean"]) == (0, 0, 1.5)
