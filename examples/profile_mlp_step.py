# Where a training step's time goes: one SGD step of a small MLP, compiled by jit,
# with the `profile` output (in the page: tick "profile" under the XLA outputs, then
# open the Profile tab). Each row is an HLO instruction XLA ran (a fusion, a dot),
# with its time over the profiled calls, its line in the HLO tab and the line below
# that made it, and a roofline: FLOP/s and bytes/s against this worker's peaks.
#
# Try:
#   jaxplay run examples/profile_mlp_step.py --args "(params, x, y)" --transform jit --output hlo --output profile
#     -> ok
# The matmuls (line 26) take most of the time; the elementwise fusions are memory-bound.

import jax
import jax.numpy as jnp

key = jax.random.key(0)
k1, k2, k3 = jax.random.split(key, 3)
params = {
    "w1": jax.random.normal(k1, (64, 256)) * 0.1,
    "w2": jax.random.normal(k2, (256, 10)) * 0.1,
}
x = jax.random.normal(k3, (128, 64))
y = jnp.zeros((128, 10)).at[:, 0].set(1.0)


def loss(params, x, y):
    logits = jnp.tanh(x @ params["w1"]) @ params["w2"]
    return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits), axis=-1))


def f(params, x, y):
    """One SGD step: the new parameters."""
    grads = jax.grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
