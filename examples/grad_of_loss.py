# Gradient of a loss: jax.grad turns a scalar loss into the function that returns
# its gradient, and jax.jit compiles that into one XLA program. Read the jaxpr for
# the forward pass (dot_general, tanh, sub, integer_pow) followed by its transpose.
#
# Try:
#   jaxplay run examples/grad_of_loss.py --args "(jnp.ones((3,)),)" --transform grad --transform jit
#     -> ok
#   jaxplay run examples/grad_of_loss.py --args "(jnp.ones((3,)),)" --transform value_and_grad
#     -> ok

import jax.numpy as jnp

# A tiny least-squares problem: 4 examples with 3 features each.
X = jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0], [0.5, -1.0, 2.0]])
Y = jnp.array([1.0, 2.0, 3.0, 0.0])


def f(w):
    """Mean squared error of the model ``tanh(X @ w)`` (w has shape (3,))."""
    pred = jnp.tanh(X @ w)
    return jnp.mean((pred - Y) ** 2)
