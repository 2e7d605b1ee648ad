import jax.numpy as jnp


def f(x):
    return jnp.sum(jnp.sin(x) ** 2)
