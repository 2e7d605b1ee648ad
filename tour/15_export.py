import jax.numpy as jnp


def f(x):
    return jnp.concatenate([x, jnp.tanh(x)], axis=1)
