"""Each hint of the numerics output (sandbox/engine/outputs/numerics/hints.py) on a
snippet that needs it, at the equation where the error is born, and not on its cure:
the shadow made in this process (JAX imported here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import pytest

from sandbox.engine.outputs.numerics import numerics_event


def hints_of(f: Callable[..., Any], *args: Any) -> list[tuple[str, str]]:
    """(primitive, hint kind) of each row with a hint."""
    event = numerics_event(jax.make_jaxpr(f)(*args), list(args), f(*args), max_values=10**6)
    return [(r["primitive"], r["hint"]["kind"]) for r in event["rows"] if r["hint"]]


SMALL = jnp.array([1e-7, 1e-5, 1e-4], jnp.float32)
LARGE = jnp.array([10.0, 90.0, 100.0], jnp.float32)
SHIFTED = 1e4 + jax.random.normal(jax.random.key(0), (1000,))

CASES = {
    "expm1": (lambda x: jnp.exp(x) - 1, lambda x: jnp.expm1(x), SMALL, [("sub", "expm1")]),
    "log1p": (lambda x: jnp.log(1 + x), lambda x: jnp.log1p(x), SMALL, [("log", "log1p")]),
    "subtract_max": (
        lambda x: jnp.exp(x) / jnp.sum(jnp.exp(x)),
        lambda x: jax.nn.softmax(x),
        LARGE,
        [("exp", "subtract_max"), ("exp", "subtract_max")],
    ),
    "logsumexp": (
        lambda x: jnp.log(jnp.sum(jnp.exp(x))),
        lambda x: jax.nn.logsumexp(x),
        LARGE,
        [("exp", "subtract_max"), ("log", "logsumexp")],
    ),
    "cancellation": (
        lambda x: (1 - jnp.cos(x)) / x**2,
        lambda x: 2 * jnp.sin(x / 2) ** 2 / x**2,
        jnp.array([1e-3, 1e-2, 1.0], jnp.float32),
        [("sub", "cancellation")],
    ),
    "sum_order": (
        lambda x: jnp.sum(x),
        # the same terms in an order whose every partial sum is exact
        lambda x: (x[0] + x[2]) + x[1],
        jnp.array([1e8, 1.0, -1e8], jnp.float32),
        [("reduce_sum", "sum_order")],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_hint_fires_where_it_is_needed_and_not_on_the_cure(name: str) -> None:
    needs, cure, x, want = CASES[name]
    assert hints_of(needs, x) == want
    assert hints_of(cure, x) == []


def test_a_value_that_only_carries_error_gets_no_hint() -> None:
    # (1 - cos x) / x**2: the sub is named, never the div that carries its error
    got = hints_of(lambda x: (1 - jnp.cos(x)) / x**2, jnp.array([1e-3, 1e-2], jnp.float32))
    assert got == [("sub", "cancellation")]


def test_a_naive_variance_is_named_at_its_sub_and_the_two_pass_one_is_accurate() -> None:
    x = SHIFTED

    def naive(x):
        return jnp.mean(x**2) - jnp.mean(x) ** 2

    def two_pass(x):
        return jnp.mean((x - jnp.mean(x)) ** 2)

    assert hints_of(naive, x)[-1] == ("sub", "cancellation")
    worst = {}
    for f in (naive, two_pass):
        event = numerics_event(jax.make_jaxpr(f)(x), [x], f(x), max_values=10**6)
        worst[f] = event["outputs"][0]["eager"]["max"]
    # the naive one is wholly wrong; the two-pass one to float32's precision (its own
    # x - mean cancels per element too, but the mean's rounding is shared by every
    # element and cancels again in the sum of squares)
    assert worst[naive] > 0.5 and worst[two_pass] < 1e-5


def test_a_custom_vjp_functions_equations_are_rows_and_its_gradient_too() -> None:
    @jax.custom_vjp
    def g(x):
        return jnp.log(1 + x)

    g.defvjp(lambda x: (g(x), x), lambda x, ct: (ct / (1 + x),))

    def f(x):
        return jnp.sum(g(x) * 2)

    x = jnp.array([1e-7, 1e-3])
    # the primal's equations, inside the custom_vjp call (depth 1), named at the log
    assert hints_of(f, x) == [("log", "log1p")]
    # differentiated: the forward rule's equations, then the backward rule's
    event = numerics_event(jax.make_jaxpr(jax.grad(f))(x), [x], jax.grad(f)(x), max_values=10**6)
    primitives = [(r["primitive"], r["depth"]) for r in event["rows"]]
    assert primitives[:2] == [("add", 1), ("log", 1)] and ("div", 0) in primitives
