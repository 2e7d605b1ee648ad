# What will my export accept? Tick "Export" (under "What to compute"); the config menu
# holds its shapes ("b, 3": any batch size, 3 features) and platforms. The Export tab
# shows the avals as jax.export prints them, the StableHLO (tensor<?x3xf32>), the
# serialized artifact to download, and a round trip: the artifact deserialized in a
# fresh process and called on the arguments and on another batch size.
# Uncomment the `if` to see a symbolic-shape error at its line.
#
# Try:
#   jaxplay run examples/export_symbolic.py --args "(jnp.ones((4, 3)),)" --transform jit --output export --export-shape "b, 3" --export-platform cpu --export-platform tpu
#     -> ok
import jax.numpy as jnp


def f(x):
    # if x.shape[0] > 2:  # "Symbolic dimension comparison 'b' > '2' is inconclusive"
    #     x = x * 2
    return jnp.concatenate([x, jnp.tanh(x)], axis=1)
