# jit changes the result: a*x + b*x is 0 in float32 eager (1e30 - 1e30) and about
# 5e21 under jit on the CPU, where XLA contracts one product and the add into a fused
# multiply-add (one rounding, not two). Tick "Numerics" and run: the pane compares the
# compiled program with its equations bound one by one, finds the first equation whose
# compiled value differs by compiling the program cut at points (returning every
# intermediate would change what XLA fuses), and names the cause by recompiling with
# one option switched at a time, and with an optimization_barrier before that equation.
#
# Try:
#   jaxplay run examples/numerics_jit_vs_eager.py --args "(jnp.float32(1e20), jnp.float32(-1e20), jnp.float32(1e10))" --transform jit --output numerics
#     -> ok
import jax.numpy as jnp


def f(a, b, x):
    ax = a * x
    bx = b * x
    return ax + bx  # jit: a fused multiply-add; eager: two roundings, then 1e30 - 1e30
