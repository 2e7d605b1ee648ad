import jax
import jax.numpy as jnp


def f(x, n):
    for _ in range(n):
        x = jnp.sin(x)
    return x


g = jax.jit(f, static_argnums=1)
for n in (2, 3, 3):
    g(jnp.ones(3), n)
