# A Pallas kernel: x + y, one block, no grid. This CPU worker has no TPU or GPU, so
# the pallas_call (it gives no interpret= argument) runs in JAX's interpret mode, and
# a remark says so. The kernels output shows the kernel's jaxpr, the Mosaic-TPU
# module and the Triton IR JAX makes of it for hardware that is not here.
#
# Try:
#   jaxplay run examples/pallas_add.py --args "(jnp.arange(8.0), jnp.ones(8))" --output value --output remarks --output kernels
#     -> ok

import jax
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def f(x, y):
    """Elementwise x + y in one Pallas kernel."""
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)
