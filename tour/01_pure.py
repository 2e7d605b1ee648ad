import jax
import jax.numpy as jnp

scale = 2.0


def f(x):
    return x * scale  # `scale` is read while JAX traces f


g = jax.jit(f)
print(g(1.0))
scale = 10.0
print(g(1.0))
