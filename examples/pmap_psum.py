# pmap over 4 devices: on a laptop these are 4 virtual CPU devices (--devices 4).
# Each device gets one row; lax.psum over the named axis sums across devices, so
# every row is divided by the column totals. The HLO shows the all-reduce.
#
# Try:
#   jaxplay run examples/pmap_psum.py --devices 4 --args "jnp.arange(1.0, 9.0).reshape(4, 2)" --transform '{"name": "pmap", "axis_name": "devices"}' --output jaxpr --output hlo --output value
#     -> ok
# (f alone cannot run outside pmap: lax.psum needs the axis that pmap names.)

from jax import lax


def f(row):
    """Normalise one device's row by the sum over all devices."""
    total = lax.psum(row, axis_name="devices")
    return row / total
