# static_argnums: an argument that decides the program's structure (here, how many
# times to apply a layer) must be a Python value while tracing. Marked static, it
# is baked into the jaxpr, and each new value compiles a new program.
#
# Try:
#   jaxplay run examples/static_argnums.py --args "(jnp.arange(3.0), 3)" --transform '{"name": "jit", "static_argnums": 1}'
#     -> ok
#   jaxplay run examples/static_argnums.py --args "(jnp.arange(3.0), 3)" --transform jit
#     -> error: TracerIntegerConversionError at line 17
# (the second one fails: without static_argnums, n is a tracer and range() needs an int)

import jax.numpy as jnp


def f(x, n):
    """Apply a small nonlinear layer n times."""
    for _ in range(n):
        x = jnp.tanh(x) + 0.5 * x
    return x
