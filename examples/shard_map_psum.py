# shard_map with a collective: f runs once per device on its block of x (the mesh
# axis "i" splits x in 4), and lax.psum adds the blocks' sums across the axis. The
# HLO shows that sum as an all-reduce; the value is x divided by its total.
#
# Try:
#   jaxplay run examples/shard_map_psum.py --devices 4 --args "jnp.arange(1.0, 9.0)" --mesh 4:i:explicit --in-sharding '["i"]' --transform '{"name": "shard_map", "in_specs": [["i"]], "out_specs": [["i"]]}' --transform jit --output hlo --output sharding --output value
#     -> ok
# (f alone cannot run outside shard_map: lax.psum needs the axis that the mesh names.)

import jax.numpy as jnp
from jax import lax


def f(x):
    """Normalise this device's block of x by the sum over all devices."""
    total = lax.psum(jnp.sum(x), "i")
    return x / total
