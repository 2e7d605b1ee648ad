# Per-example gradients: write the loss for ONE example, take its gradient with
# respect to the weights, then vmap over the batch axis of x and y (in_axes None
# for the weights, which are shared). jit compiles the batched program.
#
# Try:
#   jaxplay run examples/per_example_grads.py --args "(jnp.ones(3), jnp.arange(12.0).reshape(4, 3), jnp.arange(4.0))" --transform grad --transform '{"name": "vmap", "in_axes": [null, 0, 0]}' --transform jit
#     -> ok
# The value has shape (4, 3): one gradient per example.

import jax.numpy as jnp


def f(w, x, y):
    """Squared error of one example: x has shape (3,), y is a scalar."""
    pred = jnp.dot(x, w)
    return (pred - y) ** 2
