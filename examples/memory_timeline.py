# What is alive at the memory peak, and which line made it: the Memory tab draws
# the bytes live at each step of XLA's schedule of jit(grad(loss)), one band per
# code line (hover a band: its line lights up), and lists the values live at the
# peak XLA names in its live-range dump. Compare it with checkpoint policies.
#
# Try:
#   jaxplay run examples/memory_timeline.py --entry loss --args "([(jnp.ones((64, 64)) * 0.01, jnp.zeros(64)) for _ in range(3)], jnp.ones((32, 64)))" --transform grad --transform jit --output memory
#     -> ok

import jax.numpy as jnp


def layer(w, b, x):
    return jnp.tanh(x @ w + b)


def loss(params, x):
    """A three-layer 64-wide tanh MLP, batch 32, its outputs summed."""
    (w1, b1), (w2, b2), (w3, b3) = params
    h1 = layer(w1, b1, x)
    h2 = jnp.tanh(h1 @ w2 + b2)
    h3 = jnp.sin(h2 @ w3 + b3)
    return jnp.sum(h3**2)
