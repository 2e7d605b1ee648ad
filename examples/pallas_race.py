# A Pallas TPU kernel with a data race: it starts a DMA into a VMEM buffer and reads
# the buffer before waiting for the copy. With --pallas-interpret tpu_races the
# kernel runs in JAX's TPU-simulating interpreter with race detection (uninitialised
# memory is NaN): the race is a remark at the two lines involved, and the output is
# NaN where the read beat the copy. Move `copy.wait()` above the read to fix it.
#
# Try:
#   jaxplay run examples/pallas_race.py --args "(jnp.ones((8, 128)),)" --pallas-interpret tpu_races --output value --output remarks
#     -> ok

import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def racy_kernel(x_ref, o_ref, buf, sem):
    copy = pltpu.make_async_copy(x_ref, buf, sem)
    copy.start()
    o_ref[...] = buf[...] * 2.0  # reads buf while the DMA may still be writing it
    copy.wait()


def f(x):
    """2 * x, through a VMEM buffer filled by a DMA (read too early)."""
    return pl.pallas_call(
        racy_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA],
    )(x)
