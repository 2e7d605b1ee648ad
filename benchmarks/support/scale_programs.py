"""The big programs of issue 32, as jaxplay requests (what the page sends): an unrolled
MLP loss of L layers and a Flax NNX transformer stack, both under grad then jit, plus
the transformer under ``jax.checkpoint`` and as a ``lax.scan`` over stacked blocks.

``request(name, edit)`` gives the request body; ``edit`` changes a comment (the
program's IR stays the same, as a user re-running a cell). Shared by
benchmarks/engine/scale.py and the engine's tests of big outputs.
"""

from __future__ import annotations

from typing import Any

#: what the page asks for by default (the server's DEFAULT_OUTPUTS)
OUTPUTS = ["jaxpr", "stablehlo", "hlo", "value", "cost", "timing", "shapes"]
GRAD_JIT = [{"name": "grad"}, {"name": "jit"}]

MLP = """\
import jax
import jax.numpy as jnp

LAYERS, WIDTH, BATCH = {layers}, 64, 32
keys = jax.random.split(jax.random.key(0), LAYERS)
params = [(jax.random.normal(k, (WIDTH, WIDTH)) / WIDTH**0.5, jnp.zeros(WIDTH)) for k in keys]
x = jnp.ones((BATCH, WIDTH))


def f(params, x):
    h = x
    for w, b in params:  # unrolled: one set of equations per layer
        h = jnp.tanh(h @ w + b)
    return jnp.mean(h**2)
"""

TRANSFORMER = """\
import jax
import jax.numpy as jnp
from flax import nnx

D, HEADS, SEQ, BATCH, BLOCKS = 128, 4, 64, 8, 6


class Block(nnx.Module):
    def __init__(self, rngs):
        self.ln1 = nnx.LayerNorm(D, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(
            num_heads=HEADS, in_features=D, decode=False, rngs=rngs
        )
        self.ln2 = nnx.LayerNorm(D, rngs=rngs)
        self.up = nnx.Linear(D, 4 * D, rngs=rngs)
        self.down = nnx.Linear(4 * D, D, rngs=rngs)

    def __call__(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.down(jax.nn.gelu(self.up(self.ln2(x))))
{model}
x = jnp.ones((BATCH, SEQ, D))
"""

STACK = """
rngs = nnx.Rngs(0)
graphdef, params = nnx.split(nnx.List([Block(rngs) for _ in range(BLOCKS)]))


def f(params, x):
    blocks = nnx.merge(graphdef, params)
    for block in blocks:
        x = {call}
    return jnp.mean(x**2)
"""

SCAN = """
rngs = nnx.Rngs(0)
block_def, _ = nnx.split(Block(rngs))
params = jax.tree.map(
    lambda *leaves: jnp.stack(leaves),
    *[nnx.split(Block(rngs))[1] for _ in range(BLOCKS)],
)


def f(params, x):
    def step(x, block_params):
        return nnx.merge(block_def, block_params)(x), None

    x, _ = jax.lax.scan(step, x, params)
    return jnp.mean(x**2)
"""

PROGRAMS: dict[str, str] = {
    **{f"mlp L={n}": MLP.format(layers=n) for n in (10, 100, 300, 1000)},
    "transformer 6": TRANSFORMER.format(model=STACK.format(call="block(x)")),
    "transformer 6 checkpoint": TRANSFORMER.format(
        model=STACK.format(call="jax.checkpoint(lambda x, block=block: block(x))(x)")
    ),
    "transformer 6 scan": TRANSFORMER.format(model=SCAN),
}


def request(name: str, edit: int = 0, outputs: list[str] | None = None) -> dict[str, Any]:
    """The request the page sends for program ``name``; ``edit`` changes a comment."""
    return {
        "code": PROGRAMS[name] + f"# edit {edit}\n",
        "args": "(params, x)",
        "transforms": GRAD_JIT,
        "outputs": list(outputs or OUTPUTS),
    }
