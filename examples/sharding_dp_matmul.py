# Data parallelism on a mesh of 4 virtual CPU devices: the batch (the rows of x)
# is split over the mesh axis "batch", w is replicated. Each device multiplies its
# own rows by the whole of w, so the program needs no collective: the sharding
# output draws the blocks and lists none.
#
# Try:
#   jaxplay run examples/sharding_dp_matmul.py --devices 4 --args "(jnp.arange(32.0).reshape(8, 4) / 32, jnp.ones((4, 3)))" --mesh 4:batch:auto --in-sharding '["batch", null]' --in-sharding null --transform jit --output hlo --output sharding
#     -> ok

import jax.numpy as jnp


def f(x, w):
    """One layer over a batch: x has shape (batch, 4), w has shape (4, 3)."""
    return jnp.tanh(x @ w)
