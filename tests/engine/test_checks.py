"""The one-click checks (request ``checks``, sandbox/engine/outputs/checks.py) on the warm
engine. What JAX itself says is computed in the same run, by the snippet's top-level
code calling JAX's APIs directly and printing it: the checks must say the same."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox.protocol import RunRequest


def by_type(
    events: list[dict[str, Any]], kind: str, pipeline: str = "main"
) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind and e.get("pipeline", "main") == pipeline]


def results(
    events: list[dict[str, Any]], name: str, pipeline: str = "main"
) -> list[dict[str, Any]]:
    (event,) = by_type(events, "checks", pipeline)
    return [r for r in event["results"] if r["name"] == name]


def stdout(events: list[dict[str, Any]]) -> str:
    return "".join(e["text"] for e in by_type(events, "stdout"))


NAN_AND_KEYS = """import jax
import jax.numpy as jnp

def f(x, key):
    a = jax.random.normal(key, x.shape)
    b = jax.random.uniform(key, x.shape)
    y = jnp.log(x - 1.0)
    return a + b + y
"""
SECOND_KEY_USE, LOG_LINE = 6, 7


@pytest.mark.slow
def test_nans_and_key_reuse_at_their_lines_and_nothing_left_for_the_next_pipeline(run) -> None:
    # the compare pipeline runs after the main one's checks, in the same process (each
    # warm-engine run is a fresh fork: this is the following run): were a debug flag
    # left on, its plain execution (a NaN, a key used twice) would raise
    events = run(
        {
            "code": NAN_AND_KEYS,
            "args": "(jnp.array([0.0, 2.0]), jax.random.key(0))",
            "transforms": [{"name": "jit"}],
            "compare": [[{"name": "jit"}]],
            "outputs": ["value"],
            "timeout_s": 120,  # the outcome is the point: a loaded machine is slow
            "checks": ["nans", "infs", "key_reuse"],
        }
    )
    (nans,) = results(events, "nans")
    assert nans["status"] == "failed" and nans["line"] == LOG_LINE
    assert "nan" in nans["message"].lower() and nans["hint"]
    (infs,) = results(events, "infs")
    assert infs["status"] == "ok", infs  # log(-1) is a NaN, not an infinity
    (reuse,) = results(events, "key_reuse")
    assert reuse["status"] == "failed" and reuse["line"] == SECOND_KEY_USE, reuse
    (later,) = by_type(events, "value", "0")
    assert later["tree"][0]["summary"]["nan_count"] == 1
    assert by_type(events, "error") == [] and by_type(events, "error", "0") == []
    assert events[-1]["status"] == "ok"


CHECKIFY = """import jax
import jax.numpy as jnp
from jax.experimental import checkify

def f(x, i, j):
    a = x[i]
    b = j // j
    return a + b

err, _ = checkify.checkify(f, errors=checkify.all_checks)(jnp.arange(3.0), jnp.array(5), jnp.array(1))
print("OOB:", err.get())
err, _ = checkify.checkify(f, errors=checkify.all_checks)(jnp.arange(3.0), jnp.array(0), jnp.array(0))
print("DIV:", err.get())
"""
INDEX_LINE, DIV_LINE = 6, 7


@pytest.mark.slow
def test_checkify_reports_each_error_at_its_line(run) -> None:
    events = run(
        {
            "code": CHECKIFY,
            "args": "(jnp.arange(3.0), jnp.array(5), jnp.array(0))",
            "outputs": [],
            "timeout_s": 120,  # the outcome is the point: a loaded machine is slow
            "checks": ["checkify"],
        }
    )
    printed = dict(line.split(": ", 1) for line in stdout(events).splitlines())
    found = {r["line"]: r for r in results(events, "checkify")}
    assert set(found) == {INDEX_LINE, DIV_LINE}, found
    assert all(r["status"] == "failed" for r in found.values())
    assert found[INDEX_LINE]["message"] == printed["OOB"].strip()
    assert found[DIV_LINE]["message"] == printed["DIV"].strip()


CUSTOM_VJP = """import jax
import jax.numpy as jnp
from jax.test_util import check_grads

@jax.custom_vjp
def s(x):
    return jnp.sin(x)

def s_fwd(x):
    return jnp.sin(x), x

def s_bwd(x, g):
    return (jnp.sin(x) * g,)  # wrong: the derivative of sin is cos

s.defvjp(s_fwd, s_bwd)

def f(x):
    return jnp.sum(s(x) * x)

try:  # the program the run compiles: f under a plain jit (the pipeline has none)
    check_grads(jax.jit(f), (jnp.array([0.5, 1.0, 2.0]),), order=1, modes=["rev"])
except AssertionError as e:
    print(e)
"""
BWD_LINE = 12


@pytest.mark.slow
def test_grad_catches_a_wrong_custom_vjp_rule_by_how_much_and_where(run) -> None:
    events = run(
        {
            "code": CUSTOM_VJP,
            "args": "jnp.array([0.5, 1.0, 2.0])",
            "outputs": [],
            "timeout_s": 120,  # the outcome is the point: a loaded machine is slow
            "checks": ["grad"],
            "grad_orders": [1, 2],
        }
    )
    said = stdout(events)
    jax_abs = float(re.search(r"Max absolute difference[^:]*: (\S+)", said).group(1))
    jax_rel = float(re.search(r"Max relative difference[^:]*: (\S+)", said).group(1))
    grads = {(r["order"], r["mode"]): r for r in results(events, "grad")}
    assert set(grads) == {(1, "fwd"), (1, "rev"), (2, "fwd"), (2, "rev")}
    rev = grads[1, "rev"]
    assert rev["status"] == "failed" and rev["line"] == BWD_LINE
    assert rev["max_abs_error"] == jax_abs and rev["max_rel_error"] == jax_rel
    assert "s_bwd" in rev["message"]
    assert grads[2, "rev"]["status"] == "failed"
    # JAX refuses forward mode through a custom_vjp: skipped, with its words
    assert grads[1, "fwd"]["status"] == "skipped" and "custom_vjp" in grads[1, "fwd"]["message"]
    assert events[-1]["status"] == "ok"


CUSTOM_JVP = """import jax
import jax.numpy as jnp

@jax.custom_jvp
def c(x):
    return jnp.sin(x)

@c.defjvp
def c_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return jnp.sin(x), jnp.cos(x) * t

def f(x):
    return jnp.sum(c(x) * x)
"""


def test_grad_passes_a_correct_custom_jvp_rule_and_names_it(run) -> None:
    events = run(
        {
            "code": CUSTOM_JVP,
            "args": "jnp.array([0.5, 1.0, 2.0])",
            "transforms": [{"name": "jit"}],
            "outputs": [],
            "timeout_s": 120,  # the outcome is the point: a loaded machine is slow
            "checks": ["grad"],
        }
    )
    grads = results(events, "grad")
    assert [(r["order"], r["mode"], r["status"]) for r in grads] == [
        (1, "fwd", "ok"),
        (1, "rev", "ok"),
    ]
    # the rule's line: where it is defined (its decorator's line, as Python counts it)
    assert all(r["line"] == 8 and "c_jvp" in r["message"] for r in grads), grads


def test_checks_are_in_the_outputs_and_the_cache_key_and_unknown_ones_are_refused() -> None:
    asked = RunRequest(code="", checks=["grad", "nans", "grad"], grad_orders=[2, 1])
    assert asked.checks == ["grad", "nans"] and asked.grad_orders == [1, 2]
    assert "checks" in asked.outputs
    assert "checks" not in RunRequest(code="", outputs=["jaxpr", "checks"]).outputs
    dumped = asked.model_dump(mode="json")
    assert dumped["checks"] == ["grad", "nans"] and dumped["grad_orders"] == [1, 2]
    assert RunRequest.model_validate(dumped) == asked


#: In a process of its own (the check installs an audit hook), as a zygote's child: the
#: warm-up imported what the checks import, so a first run of every check imports
#: nothing new, and a second one changes nothing the kept process's check compares
#: (the debug flags, set with JAX's context managers, are back as they were).
KEPT = """
import sys
import jax
import jax.numpy as jnp
from sandbox.engine.core import warmup
from sandbox.zygote import watch as state_watch

warmup.prepare(thorough=True)
from sandbox.engine.outputs.checks import Subject, run_checks

SOURCES = {sources!r}


def run():
    for code, args in SOURCES:
        namespace = {{"__name__": "snippet"}}
        exec(compile(code, "snippet.py", "exec"), namespace)
        subject = Subject(jax.jit(namespace["f"]), eval(args, namespace), namespace=namespace)
        event = run_checks(subject, ["nans", "infs", "key_reuse", "checkify", "grad"], [1], ["rev"])
        assert any(r["status"] == "failed" for r in event["results"]), event


def main():
    before = set(sys.modules)
    run()
    new = [m for m in set(sys.modules) - before if m.startswith(("jax.", "sandbox."))]
    ours = [m for m in new if m.startswith("sandbox.") or "checkify" in m or "key_reuse" in m
            or "test_util" in m]
    assert ours == [], ours
    watch = state_watch.Watch()
    run()
    assert watch.changes() == [], watch.changes()
    assert not jax.config.jax_debug_nans and not jax.config.jax_debug_infs
    print("kept")


main()
"""


@pytest.mark.slow
def test_a_kept_process_is_kept_after_checks() -> None:
    sources = [
        (NAN_AND_KEYS, "(jnp.array([0.0, 2.0]), jax.random.key(0))"),
        (CUSTOM_VJP.split("try:")[0], "(jnp.array([0.5, 1.0, 2.0]),)"),
    ]
    done = subprocess.run(
        [sys.executable, "-c", KEPT.format(sources=sources)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0 and "kept" in done.stdout, done.stderr[-3000:]


# --- what the checks share: in this process, the calls counted ----------------------

WHERE_SQRT_SOURCE = """import jax.numpy as jnp

def f(x):
    return jnp.where(x > 0, jnp.sqrt(x), 0.0)
"""


def _subject(code: str, args: tuple[Any, ...], transforms: Any = None) -> tuple[Any, list[int]]:
    """A Subject of the snippet's ``f`` (under ``transforms``), and a count of its calls
    on values (a trace, on tracers, is not counted)."""
    import jax

    from sandbox.engine.outputs.checks import Subject

    namespace: dict[str, Any] = {"__name__": "snippet"}
    exec(compile(code, "snippet.py", "exec"), namespace)
    fn = (transforms or (lambda g: g))(namespace["f"])
    calls = [0]

    def counted(*a: Any) -> Any:
        if not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(a)):
            calls[0] += 1
        return fn(*a)

    return Subject(counted, args, namespace=namespace), calls


def test_nans_and_infs_share_one_call_when_nothing_is_found_and_say_what_each_says_alone() -> None:
    import jax
    import jax.numpy as jnp

    from sandbox.engine.outputs.checks import check_debug_pair, check_debug_values, run_checks

    # nothing to find: one call under both flags, both ok
    subject, calls = _subject(WHERE_SQRT_SOURCE, (jnp.array(4.0),), jax.grad)
    assert [
        r["status"] for r in run_checks(subject, ["nans", "infs"], [1], ["rev"])["results"]
    ] == [
        "ok",
        "ok",
    ]
    assert calls == [1]
    # at 0, JAX itself: the gradient's Inf (forward) then NaN (backward)
    assert jnp.isnan(jax.grad(lambda x: jnp.where(x > 0, jnp.sqrt(x), 0.0))(0.0))
    subject, calls = _subject(WHERE_SQRT_SOURCE, (jnp.array(0.0),), jax.grad)
    pair = check_debug_pair(subject)
    alone = [check_debug_values(subject, "nans"), check_debug_values(subject, "infs")]
    assert pair == alone
    assert [r["status"] for r in pair] == ["failed", "failed"] and pair[0]["line"] == 4
    assert "nan" in pair[0]["message"] and "inf" in pair[1]["message"]


def test_key_reuse_runs_the_pipeline_only_where_its_jaxpr_holds_a_typed_key() -> None:
    import jax
    import jax.numpy as jnp

    from sandbox.engine.outputs.checks import KEY_REUSE_OK, check_key_reuse

    subject, calls = _subject(WHERE_SQRT_SOURCE, (jnp.array(4.0),), jax.jit)
    assert check_key_reuse(subject) == {
        "name": "key_reuse",
        "status": "ok",
        "message": KEY_REUSE_OK,
        "line": None,
    }
    assert calls == [0]  # traced once for its jaxpr, never called
    subject, calls = _subject(NAN_AND_KEYS, (jnp.array([0.0, 2.0]), jax.random.key(0)), jax.jit)
    reuse = check_key_reuse(subject)
    assert calls == [1] and reuse["status"] == "failed" and reuse["line"] == SECOND_KEY_USE
    # a key made inside, from an integer seed: in the jaxpr too
    made_inside = NAN_AND_KEYS.replace(
        "def f(x, key):", "def f(x, seed):\n    key = jax.random.key(seed)"
    )
    subject, calls = _subject(made_inside, (jnp.array([0.0, 2.0]), 0), jax.jit)
    assert check_key_reuse(subject)["status"] == "failed" and calls == [1]


def test_checkify_says_each_kind_of_error_as_jax_does_under_vmap() -> None:
    # the check calls the checkified pipeline under jax.jit; JAX's own, called as it
    # is, one error set at a time (its message is the first error of that set)
    import jax
    import jax.numpy as jnp
    from jax.experimental import checkify

    from sandbox.engine.outputs.checks import Subject, check_checkify

    def f(x, i):
        return jnp.log(x) + jnp.arange(3.0)[i]

    pipeline = jax.vmap(f)
    args = (jnp.array([1.0, -1.0, 2.0, -3.0]), jnp.array([0, 1, 7, 2]))
    expected = sorted(
        str(checkify.checkify(pipeline, errors=errors)(*args)[0].get()).strip()
        for errors in (checkify.nan_checks, checkify.index_checks)
    )
    assert all(expected)  # a NaN (the log of -1) and an index out of bounds (7)
    got = check_checkify(Subject(pipeline, args))
    assert all(r["status"] == "failed" for r in got)
    assert sorted(r["message"] for r in got) == expected


def test_grad_checks_the_program_the_run_compiles_with_jax_s_own_error_sizes() -> None:
    # a pipeline without a jit: the check differentiates it under jax.jit, as the run
    # compiles it, so f itself is only traced, never called on values (check_grads on
    # f as it is calls it on values, an operation at a time); the sizes are those of
    # check_grads(jax.jit(f)) called directly
    import jax
    import jax.numpy as jnp
    from jax.test_util import check_grads

    from sandbox.engine.outputs.checks import check_grad

    x = jnp.array([0.5, 1.0, 2.0])
    subject, calls = _subject(CUSTOM_VJP.split("try:")[0], (x,))
    with pytest.raises(AssertionError) as said:
        check_grads(jax.jit(subject.namespace["f"]), (x,), order=1, modes=["rev"])
    (got,) = check_grad(subject, [1], ["rev"])
    assert calls == [0]
    assert got["status"] == "failed" and got["line"] == BWD_LINE and "s_bwd" in got["message"]
    jax_abs = float(re.search(r"Max absolute difference[^:]*: (\S+)", str(said.value)).group(1))
    jax_rel = float(re.search(r"Max relative difference[^:]*: (\S+)", str(said.value)).group(1))
    assert (got["max_abs_error"], got["max_rel_error"]) == (jax_abs, jax_rel)


def test_grad_of_a_pipeline_with_its_own_jit_holds_its_static_and_integer_arguments() -> None:
    import jax
    import jax.numpy as jnp

    from sandbox.engine.outputs.checks import AS_IS, Subject, check_grad

    def f(x, n, kind):
        return jnp.sum(jnp.sin(x) * n) if kind == "sin" else jnp.sum(x)

    x = jnp.array([0.5, 1.0, 2.0])
    own = Subject(jax.jit(f, static_argnums=(2,)), (x, 3, "sin"), static_argnums=(2,))
    wrapped = Subject(f, (x, jnp.array(3), "sin"))  # no jit: a str closed over by ours
    for subject in (own, wrapped):
        got = check_grad(subject, [1], ["fwd", "rev"])
        assert [r["status"] for r in got] == ["ok"] * 2, got
        assert not any(AS_IS in r["message"] for r in got)


PYTHON_IF = """import jax.numpy as jnp

def f(x):
    if x > 0:  # Python reads the value: jax.jit cannot trace it, grad can
        return jnp.sin(x) * x
    return -x
"""


def test_grad_of_a_pipeline_jit_cannot_trace_calls_it_as_it_is_and_says_so() -> None:
    import jax
    import jax.numpy as jnp

    from sandbox.engine.outputs.checks import AS_IS, check_grad

    subject, calls = _subject(PYTHON_IF, (jnp.array(0.7),))
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(jax.grad(subject.namespace["f"]))(0.7)
    assert float(jax.grad(subject.namespace["f"])(0.7)) != 0.0  # as it is, it runs
    got = check_grad(subject, [1], ["fwd", "rev"])
    assert [r["status"] for r in got] == ["ok", "ok"], got
    assert all(r["message"].endswith(AS_IS) for r in got)
    assert calls[0] > 0  # called on values: as it is


PALLAS_LOG = """import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

def kernel(x_ref, o_ref):
    o_ref[...] = jnp.log(x_ref[...])

def f(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
"""
PALLAS_CALL_LINE = 9


def test_nans_and_infs_stop_at_a_pallas_call_as_at_an_operation_run_on_its_own() -> None:
    """A pallas_call executes as a jit of itself: JAX's de-optimized re-run of a NaN in
    its output reached the same jit again, to a RecursionError. In a run it stops at the
    pallas_call, with what JAX says for the operation executed on its own."""
    import jax
    import jax.numpy as jnp
    from jax._src import dispatch
    from jax._src.pallas.pallas_call import pallas_call_p

    from sandbox.engine.core.pallas import interpreting
    from sandbox.engine.outputs.checks import check_debug_values
    from sandbox.engine.outputs.kernels import _pallas_eqns

    original_impl = pallas_call_p.impl
    with interpreting(RunRequest(code=PALLAS_LOG, args="()"), None):
        for name, flag, value in (("nans", jax.debug_nans, -1.0), ("infs", jax.debug_infs, 0.0)):
            x = jnp.full((8, 128), value)
            subject, _ = _subject(PALLAS_LOG, (x,), jax.jit)
            got = check_debug_values(subject, name)
            (eqn,) = _pallas_eqns(jax.make_jaxpr(subject.fn)(x).jaxpr)
            with pytest.raises(FloatingPointError) as jax_says, flag(True):
                dispatch.apply_primitive(pallas_call_p, x, **eqn.params)
            assert got["status"] == "failed", got
            assert (got["message"], got["line"]) == (str(jax_says.value), PALLAS_CALL_LINE)
    assert pallas_call_p.impl is original_impl
