# An Optax learning-rate schedule is a function of the step count, so JAX traces it
# like any other: warm up linearly, then decay with a cosine. vmap evaluates it at
# every step of the argument at once.
#
# Try:
#   jaxplay run examples/optax_schedule.py --args "jnp.arange(0, 100, 10)" --transform vmap --transform jit
#     -> ok
# The value is the learning rate at steps 0, 10, ..., 90.

import optax

schedule = optax.warmup_cosine_decay_schedule(
    init_value=0.0, peak_value=1e-3, warmup_steps=20, decay_steps=100, end_value=1e-5
)


def f(step):
    return schedule(step)
