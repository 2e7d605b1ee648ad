# An Equinox MLP is a pytree: its weights are array leaves, its activation function
# is not. eqx.partition splits the arrays off (what jit may take as arguments) from
# the rest (static, closed over); eqx.filter_grad differentiates with respect to the
# arrays only. The value is a model-shaped pytree of gradients.
#
# Try:
#   jaxplay run examples/equinox_mlp_filter_grad.py --args "(params, jnp.ones((5, 2)))" --transform jit --timeout 60
#     -> ok

import equinox as eqx
import jax
import jax.numpy as jnp

model = eqx.nn.MLP(in_size=2, out_size=1, width_size=16, depth=2, key=jax.random.key(0))
params, static = eqx.partition(model, eqx.is_array)


def loss(params, x):
    model = eqx.combine(params, static)
    return jnp.mean(jax.vmap(model)(x) ** 2)


def f(params, x):
    return eqx.filter_grad(loss)(params, x)
