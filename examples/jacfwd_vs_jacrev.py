# jacfwd against jacrev: forward mode pushes one tangent per INPUT through f,
# reverse mode pulls one cotangent per OUTPUT back. For this f (8 inputs, 2
# outputs) reverse mode does less work; compare the two jaxprs and the timings.
#
# Try:
#   jaxplay run examples/jacfwd_vs_jacrev.py --args "jnp.linspace(0.0, 1.0, 8)" --transform jacfwd --transform jit
#     -> ok
#   jaxplay run examples/jacfwd_vs_jacrev.py --args "jnp.linspace(0.0, 1.0, 8)" --transform jacrev --transform jit
#     -> ok
# On the page (or with --request) put both in one run: transforms [jacfwd] and
# compare [[jacrev]], with the "timing" output.

import jax.numpy as jnp


def f(x):
    """R^8 -> R^2: a wide Jacobian."""
    return jnp.stack([jnp.sum(jnp.sin(x) ** 2), jnp.sum(jnp.cumsum(x) ** 2)])
