# Why is this collective here? a's rows are split over x (its in_sharding); the first
# constraint moves x to the last dimension: an all-to-all whose origin is that argument
# (from) and that constraint (to), each at its line. The second constraint asks for a
# layout no collective reaches from the first's: XLA replicates the whole value on
# every device and slices it again, and says so only in a log line ("involuntary full
# rematerialization"), shown here as a remark at the line of the value it copies, with
# both shardings.
#
# Try:
#   jaxplay run examples/sharding_provenance.py --devices 8 --args "(jnp.ones((8, 8, 8)),)" --mesh 2x4:x,y:auto,auto --in-sharding '["x", null, null]' --transform jit --output sharding
#     -> ok

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def f(a):
    b = jnp.sin(a)
    c = jax.lax.with_sharding_constraint(b, P(None, None, "x"))
    d = jax.lax.with_sharding_constraint(c, P(None, "y", None))
    return d * 3
