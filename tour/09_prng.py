from jax import random


def f(key):
    a = random.normal(key, (3,))
    b = random.normal(key, (3,))
    return a - b
