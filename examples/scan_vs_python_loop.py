# lax.scan against a Python loop. Under jit a Python loop is unrolled: the jaxpr
# repeats the body once per step, and compile time grows with the length. lax.scan
# traces the body once and keeps the loop in the program.
#
# Try:
#   jaxplay run examples/scan_vs_python_loop.py --entry python_loop --args "jnp.arange(8.0)" --transform jit --output jaxpr
#     -> ok
#   jaxplay run examples/scan_vs_python_loop.py --entry f --args "jnp.arange(8.0)" --transform jit --output jaxpr
#     -> ok

import jax.numpy as jnp
from jax import lax


def step(carry, x):
    carry = jnp.tanh(0.9 * carry + x)
    return carry, carry


def python_loop(xs):
    """The running filter as a Python loop: unrolled, len(xs) copies of step."""
    carry, ys = 0.0, []
    for x in xs:
        carry, y = step(carry, x)
        ys.append(y)
    return jnp.stack(ys)


def f(xs):
    """The same filter with lax.scan: one copy of step, in a loop."""
    _, ys = lax.scan(step, 0.0, xs)
    return ys
