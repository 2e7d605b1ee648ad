# A 2-D sharded layer on a 2 x 2 mesh of virtual CPU devices: x split over both
# mesh axes, w's rows over y. The contraction over y is summed across devices: the
# sharding output lists that all-reduce at the line of `x @ w`, and draws which
# device holds which block. With Explicit axes (make_mesh's default in new JAX) the
# same matmul is ambiguous, and JAX says so: a ShardingTypeError at that line.
#
# Try:
#   jaxplay run examples/sharded_matmul.py --devices 4 --args "(jnp.ones((8, 4)), jnp.ones((4, 2)))" --mesh 2x2:x,y:auto,auto --in-sharding '["x", "y"]' --in-sharding '["y", null]' --out-sharding '["x", null]' --transform jit --output hlo --output sharding
#     -> ok
#   jaxplay run examples/sharded_matmul.py --devices 4 --args "(jnp.ones((8, 4)), jnp.ones((4, 2)))" --mesh 2x2:x,y:explicit,explicit --in-sharding '["x", "y"]' --in-sharding '["y", null]' --transform jit --output jaxpr
#     -> error: ShardingTypeError at line 18

import jax.numpy as jnp


def f(x, w):
    """One layer: a matmul whose contracted dimension is sharded."""
    y = x @ w
    return jnp.tanh(y)
