import jax.numpy as jnp


def f(x):
    if x > 0:
        return x**2
    return -x
