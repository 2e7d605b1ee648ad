import jax.numpy as jnp


def f(x):
    return jnp.stack([jnp.sum(jnp.sin(x) ** 2), jnp.sum(jnp.cumsum(x) ** 2)])
