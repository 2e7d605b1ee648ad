# Rematerialisation with jax.checkpoint: instead of storing every intermediate of
# the forward pass for the backward pass, recompute some of them. The policy
# dots_with_no_batch_dims_saveable keeps the matmul results and recomputes the
# cheap tanh's: look for remat in the jaxpr of grad.
#
# Try:
#   jaxplay run examples/checkpoint.py --args "(jnp.eye(4) * 0.5, jnp.ones((2, 4)))" --transform '{"name": "checkpoint", "policy": "dots_with_no_batch_dims_saveable"}' --transform grad --transform jit
#     -> ok
#   jaxplay run examples/checkpoint.py --args "(jnp.eye(4) * 0.5, jnp.ones((2, 4)))" --transform grad --transform jit
#     -> ok

import jax.numpy as jnp


def f(w, x):
    """A three-layer tanh network with shared weights, summed to a scalar."""
    for _ in range(3):
        x = jnp.tanh(x @ w)
    return jnp.sum(x)
