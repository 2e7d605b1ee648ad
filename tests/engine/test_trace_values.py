"""The value stepper (``trace_values``): the run's jaxpr stepped on its own arguments,
on the warm engine; its budgets on small ones, in this process."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from sandbox.engine.trace_values import ITERATIONS_SHOWN, Stepper
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
    from sandbox.engine.outputs import Results
    from sandbox.engine.trace_values import trace_values_results
    from sandbox.protocol import RunRequest

    class Pipe:
        fn = staticmethod(jax.jit(jax.grad(_where_sqrt)))
        static_argnums = ()

        def dynamic_args(self, args):
            return args

    for compare_too in (False, True):
        asked = RunRequest.model_validate({**request, "trace_values_compare": compare_too})
        results = Results(
            extra={
                "request": asked,
                "transforms": asked.compare[0],
                "pipeline": "0",
                "pipe": Pipe(),
                "args": (0.0,),
            }
        )
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
