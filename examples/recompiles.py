# Why does it recompile? Tick "Recompiles" (under "What to compute") and run: each line
# that calls a jitted function is marked in the editor with its compiles and hits, and
# the Recompiles tab lists JAX's own explanation of every cache miss with its trace,
# lower and compile milliseconds. JAX explains nothing for a jit whose target is itself
# jitted (jax.jit(jnp.sin)): the tab says so.
#
# Try:
#   jaxplay run examples/recompiles.py --args "(jnp.ones(4),)" --output recompiles
#     -> ok
import jax
import jax.numpy as jnp


def step(x):
    return jnp.tanh(x) * 2.0


fast = jax.jit(step)
for n in (3, 4, 4):  # a new shape compiles again; the same shape hits the cache
    fast(jnp.ones(n))

sin = jax.jit(jnp.sin)
sin(jnp.ones(3))


def f(x):
    for scale in (1.0, 2.0):  # f32[4] again: compiled at line 20 already, two hits
        fast(x * scale)
    return fast(x).sum()
