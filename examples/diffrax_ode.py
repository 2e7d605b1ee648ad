# Diffrax solves an ODE with JAX: each solver step is traced once, and the time
# loop is a while_loop in the jaxpr (not unrolled). Here dy/dt = -y with Tsit5 from
# t = 0 to 1; the answer is y0 * exp(-1).
#
# Try:
#   jaxplay run examples/diffrax_ode.py --args "jnp.ones(3)" --transform jit
#     -> ok
# Add --transform grad before jit (with a scalar output: sum it) to see Diffrax's
# adjoint: the backward pass differentiates through the solver's loop.

import diffrax


def vector_field(t, y, args):
    return -y


def f(y0):
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field), diffrax.Tsit5(), t0=0.0, t1=1.0, dt0=0.1, y0=y0
    )
    return solution.ys[-1]
