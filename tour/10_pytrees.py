import jax.numpy as jnp


def loss(params, x):
    h = jnp.tanh(x @ params["w"] + params["b"])
    return jnp.mean(h**2)
