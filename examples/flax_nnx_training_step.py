# One training step of a Flax NNX model with an Optax optimizer: the model and the
# optimizer are made once, at the top; f is the step, written as a pure function of
# the parameters and the batch (nnx.split / nnx.merge), so every transform applies.
# jit compiles the step; the value is the new parameters, an nnx.State.
#
# Try:
#   jaxplay run examples/flax_nnx_training_step.py --args "(params, jnp.ones((4, 3)), jnp.zeros((4, 1)))" --transform jit --timeout 60
#     -> ok
# The jaxpr shows the forward pass, its gradient and Adam's update, fused by jit.

import jax
import jax.numpy as jnp
import optax
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(3, 8, rngs=rngs)
        self.out = nnx.Linear(8, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(jax.nn.relu(self.hidden(x)))


graphdef, params = nnx.split(MLP(nnx.Rngs(0)))
optimizer = optax.adam(1e-2)
opt_state = optimizer.init(params)


def loss(params, x, y):
    model = nnx.merge(graphdef, params)
    return jnp.mean((model(x) - y) ** 2)


def f(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    updates, _ = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates)
