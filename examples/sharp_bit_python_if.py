# A JAX sharp bit: Python `if` on a traced value. Under jit (and grad, vmap...) x
# is a tracer standing for any array of its shape and dtype, so `x.sum() > 0` has
# no True/False yet. Use jnp.where (values) or lax.cond (control flow) instead.
#
# Try:
#   jaxplay run examples/sharp_bit_python_if.py --args "jnp.arange(-2.0, 3.0)" --transform jit
#     -> error: TracerBoolConversionError at line 16
#   jaxplay run examples/sharp_bit_python_if.py --entry fixed --args "jnp.arange(-2.0, 3.0)" --transform jit
#     -> ok

from jax import lax


def f(x):
    """Fails under jit: Python control flow on a traced value."""
    if x.sum() > 0:
        return x * 2.0
    return -x


def fixed(x):
    """The same with lax.cond: both branches are traced, one runs."""
    return lax.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v, x)
