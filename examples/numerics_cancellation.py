# Where do the digits go? Tick "Numerics" (under "What to compute") and run: every
# equation is evaluated again in float64 (a shadow of the program), and each row says
# how far the float32 value is from it ("error") and how much of that the equation
# adds itself ("born"). Here 1 - cos(x) cancels: for x = 1e-3, cos(x) rounds to within
# half an ulp of 1 and the difference keeps none of its digits, so the sub's line is
# banded and named, while the div after it only carries the error on. The cure:
# 1 - cos(x) = 2 * sin(x / 2)**2.
#
# Try:
#   jaxplay run examples/numerics_cancellation.py --args "jnp.array([1e-3, 1e-2, 1.0])" --output numerics
#     -> ok
import jax.numpy as jnp


def f(x):
    c = jnp.cos(x)
    top = 1 - c  # cancels for small x: 2 * jnp.sin(x / 2) ** 2 does not
    return top / x**2
