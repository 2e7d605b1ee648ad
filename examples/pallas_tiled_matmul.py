# A tiled matmul in Pallas on a 2 x 2 grid: grid point (i, j) reads row block i of x
# and column block j of y and writes block (i, j) of the output. The kernels output's
# grid map evaluates each BlockSpec's index map on every grid point: hover a grid
# cell on the page to see the blocks it touches.
#
# Try:
#   jaxplay run examples/pallas_tiled_matmul.py --args "(jnp.ones((256, 256)), jnp.ones((256, 256)))" --output value --output kernels
#     -> ok

import jax
from jax.experimental import pallas as pl

BLOCK = 128


def matmul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] @ y_ref[...]


def f(x, y):
    """x @ y, one (BLOCK, BLOCK) output block per grid point."""
    m, n = x.shape[0], y.shape[1]
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // BLOCK, n // BLOCK),
        in_specs=[
            pl.BlockSpec((BLOCK, x.shape[1]), lambda i, j: (i, 0)),
            pl.BlockSpec((y.shape[0], BLOCK), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j)),
    )(x, y)
