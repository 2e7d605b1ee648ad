import jax.numpy as jnp


def f(x):
    y = jnp.sin(x)
    z = y * 2.0
    return jnp.exp(z) + 1.0
