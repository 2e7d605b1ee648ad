import jax
import jax.numpy as jnp


def f(w, x):
    z = jnp.dot(w, x)
    return jnp.maximum(z, 0.0)
