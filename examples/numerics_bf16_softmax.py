# A softmax in bfloat16, written the naive way: exp(x) / sum(exp(x)). bfloat16 keeps
# float32's exponent range, so exp(90) overflows it just the same (the largest finite
# bfloat16 is about 3.4e38, exp(89) more): the sum is inf, and inf / inf is NaN. Tick
# "Numerics" and run: the float64 shadow has no overflow, the exp's row is where the
# error is born, and its hint says the cure (subtract the maximum first, as
# jax.nn.softmax does). Then try "Compare precision settings" in the pane.
#
# Try:
#   jaxplay run examples/numerics_bf16_softmax.py --args "jnp.array([1.0, 2.0, 90.0, 100.0], jnp.bfloat16)" --output numerics
#     -> ok
import jax.numpy as jnp


def f(logits):
    e = jnp.exp(logits)  # jnp.exp(logits - logits.max()) cannot overflow
    return e / e.sum()
