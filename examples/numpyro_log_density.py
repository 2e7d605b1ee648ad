# A NumPyro model's log density is a JAX function of its parameters: grad gives the
# score that samplers such as NUTS follow. Here a normal likelihood of four
# observations with a normal prior on its mean.
#
# Try:
#   jaxplay run examples/numpyro_log_density.py --args "0.5" --transform grad --transform jit
#     -> ok
# The value is d/dmu of log p(mu) + sum log p(y | mu): the jaxpr holds the two
# distributions' log_prob formulas, differentiated.

import jax.numpy as jnp
import numpyro.distributions as dist

observed = jnp.array([0.3, -0.1, 1.2, 0.8])


def f(mu):
    prior = dist.Normal(0.0, 1.0).log_prob(mu)
    likelihood = dist.Normal(mu, 0.5).log_prob(observed).sum()
    return prior + likelihood
