"""A worker's warm-up: what a process does before its first run so that the run
pays less (JAX imported and its tracing paths warmed without a backend; then, in a
warm child, the backend started and a small request run), and what it runs on.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox.engine.core import registry
from sandbox.engine.core.run import apply_config, run_message, worker_info
from sandbox.protocol.requests import RunRequest

#: Frames from these never count as the user's: the sandbox package (engine, zygote)
#: the interpreter's frozen modules (runpy for ``python -m``) and ``python -c`` or
#: stdin scripts (a zygote's launcher; user code is always SNIPPET_FILENAME). Without this, the
#: HLO's stack-frame tables would depend on how the worker process was started.
EXCLUDED_FRAMES = (str(Path(__file__).resolve().parents[2]), "<frozen ", "<string>", "<stdin>")


def prepare(thorough: bool = False) -> None:
    """Import JAX and warm its tracing paths without starting a backend.

    Tracing on ``ShapeDtypeStruct`` needs no device; lowering would start the
    backend (it needs a device assignment), after which a process must not fork. A
    zygote calls this once, ``thorough``: it then also traces a representative set of
    transformations and primitives (about a quarter of a second, once), so that the
    modules and caches JAX fills on first use are already there, shared by every
    child. A fresh process (``main``) skips that: it would pay it on every run.
    """
    import jax
    import jax.numpy as jnp
    from jax._src import source_info_util

    from sandbox.engine.core import pipeline, program, sources  # noqa: F401

    # the modules of what the warm-up request makes
    registry.rows(RunRequest.model_validate(WARM_REQUEST).outputs)

    # The engine's own frames must never show up as user frames in locations.
    for prefix in EXCLUDED_FRAMES:
        source_info_util.register_exclusion(prefix)
    vector = jax.ShapeDtypeStruct((3,), jnp.float32)
    batch = jax.ShapeDtypeStruct((2, 3), jnp.float32)

    def warm(x: Any) -> Any:
        return jnp.sum(jnp.tanh(x) ** 2)

    for fn, arg in (
        (jax.grad(warm), vector),
        (jax.vmap(jax.grad(warm)), batch),
        (jax.jit(warm), vector),
    ):
        jax.make_jaxpr(fn)(arg)
    if thorough:
        # every output's module, and what each imports on first use (its row's
        # ``prepare``), in the baseline that every child of the zygote shares; and
        # what a run's first lowering and compile import, which every warm child would
        # import again: the MHLO and builtin dialects' bindings (JAX loads them as it
        # makes its first MLIR context), the compile's log capture and the Pallas check.
        from jax._src.lib.mlir import dialects

        from sandbox.engine.core import compile_log, errors, pallas  # noqa: F401

        for name in ("mhlo", "builtin"):
            getattr(dialects, name, None)  # lazy attributes: this imports them
        for _, output in registry.rows(registry.NAMES):
            if output.prepare is not None:
                output.prepare()

        for fn, args in _tracing_warmups():
            try:
                jax.make_jaxpr(fn)(*args)
            except Exception as exc:  # a warm-up that JAX no longer accepts: not fatal
                print(f"jaxplay: warm-up failed: {type(exc).__name__}: {exc}", file=sys.__stderr__)


def _tracing_warmups() -> list[tuple[Callable[..., Any], tuple[Any, ...]]]:
    """Functions and abstract arguments that touch what user code commonly does:
    transformations (grad, vmap, jacfwd/jacrev, hessian, checkpoint, custom_jvp),
    control flow, dot and convolution, reductions, indexing and scatter, PRNG keys,
    jax.nn, integers. Each one only ever meets ``ShapeDtypeStruct``: no backend."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    f32 = jnp.float32
    v = jax.ShapeDtypeStruct((3,), f32)
    m = jax.ShapeDtypeStruct((3, 3), f32)
    b = jax.ShapeDtypeStruct((2, 3, 3), f32)
    img = jax.ShapeDtypeStruct((1, 2, 5, 5), f32)
    ker = jax.ShapeDtypeStruct((2, 2, 3, 3), f32)

    def loss(x: Any) -> Any:
        return jnp.sum(jnp.tanh(x) ** 2)

    def mixed(x: Any) -> Any:
        y = jnp.where(x > 0, jnp.exp(x), jnp.log1p(x * x)) * jnp.sin(x) / (1.0 + jnp.cos(x))
        return jnp.mean(y) + jnp.max(x) - jnp.min(x) + jnp.prod(x[:2]) + x[jnp.argmax(x)]

    def mat(a: Any) -> Any:
        return jnp.sum(jnp.dot(a, a.T) @ a) + jnp.trace(jnp.einsum("ij,jk->ik", a, a))

    def loops(x: Any) -> Any:
        c = lax.fori_loop(0, 3, lambda i, c: c * 2.0 + i, x)
        c, ys = lax.scan(lambda c, t: (c + t, c * t), c, jnp.stack([x, x]))
        c = lax.cond(c[0] > 0, lambda z: z + 1.0, lambda z: z - 1.0, c)
        return jnp.sum(c) + jnp.sum(ys) + jnp.sum(lax.switch(1, [jnp.sin, jnp.cos], x))

    def while_loop(x: Any) -> Any:
        return lax.while_loop(lambda c: jnp.sum(c) < 10.0, lambda c: c + 1.0, x)

    def conv(x: Any, k: Any) -> Any:
        y = lax.conv_general_dilated(x, k, (1, 1), "SAME")
        return jnp.sum(y) + jnp.sum(jnp.convolve(x[0, 0, 0], x[0, 0, 1]))

    def rand(x: Any) -> Any:
        k1, k2 = jax.random.split(jax.random.key(0))
        old = jax.random.PRNGKey(1)
        return (
            x * jax.random.normal(k1, x.shape)
            + jax.random.uniform(k2, x.shape)
            + jax.random.normal(old, x.shape)
        )

    @jax.custom_jvp
    def softplus(x: Any) -> Any:
        return jnp.log1p(jnp.exp(x))

    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] * jax.nn.sigmoid(p[0])))

    def nn(x: Any) -> Any:
        y = jax.nn.relu(x) + jax.nn.softmax(x) + jax.nn.gelu(x) + softplus(x)
        return jnp.sum(y) + jax.scipy.special.logsumexp(x)

    def index(x: Any, i: Any) -> Any:
        y = x.at[i].set(1.0).at[0].add(2.0)[1:] + x[::-1][:2].sum() + jnp.take(x, i)
        return jnp.sum(y) + jnp.sort(x)[0] + jnp.cumsum(x)[-1]

    def tree(p: Any) -> Any:
        leaves = jax.tree_util.tree_leaves(jax.tree_util.tree_map(jnp.tanh, p))
        return sum(jnp.sum(leaf) for leaf in leaves)

    return [
        (jax.value_and_grad(loss), (v,)),
        (jax.grad(mixed), (v,)),
        (jax.jacfwd(mixed), (v,)),
        (jax.jacrev(mixed), (v,)),
        (jax.hessian(loss), (v,)),
        (jax.grad(jax.checkpoint(mixed)), (v,)),
        (jax.grad(mat), (m,)),
        (jax.vmap(mat), (b,)),
        (jax.grad(loops), (v,)),
        (jax.vmap(loops), (m,)),
        (jax.jacfwd(while_loop), (v,)),
        (jax.vmap(while_loop), (m,)),
        (conv, (img, ker)),
        (jax.grad(conv), (img, ker)),
        (rand, (v,)),
        (jax.grad(nn), (v,)),
        (jax.vmap(nn), (m,)),
        (index, (v, jax.ShapeDtypeStruct((), jnp.int32))),
        (jax.grad(tree), ({"a": v, "b": [m]},)),
        (lambda x: jnp.sum(x * 2 // 3 % 2), (jax.ShapeDtypeStruct((3,), jnp.int32),)),
    ]


#: What a warm child runs first (events to /dev/null), once its backend is up: a small
#: grad and jit through every view but timing, on a shape (2,) that requests rarely
#: use, so that what it warms is JAX's and XLA's one-time set-up (backend, first
#: compile and execution, lowering and printing paths), not a cached result. Its args
#: are built by ``jnp.ones`` (not ``jnp.full``, at no extra compile): the conversion of
#: the fill value is one executable for every shape, and most requests' args build
#: with ``jnp.ones``/``jnp.zeros``, so a new tenant's first run finds it compiled
#: (~15 ms; benchmarks/engine/first_run.py). What a first run compiles beyond that is for
#: its own shapes, which no warm-up can know (docs/sandbox.md).
WARM_REQUEST = {
    "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.sin(x) ** 2)\n",
    "args": "(jnp.ones((2,)),)",
    "transforms": [{"name": "grad"}, {"name": "jit"}],
    "outputs": ["jaxpr", "stablehlo", "hlo", "value", "cost"],
    "backend": "cpu",
}


def warm_backend() -> list[Callable[[], Any]]:
    """Start the CPU backend as a run asks for it (one device: the warm-up request's
    config). Returns the warm-ups that a zygote's warm child runs while no run has
    arrived: the warm-up request (``WARM_REQUEST``, through the engine: the first
    compile and run in a process pay ~40 ms of set-up that later ones do not). The
    child says it is warm once the backend is up, before it: a run that comes first
    pays that set-up itself, as a fresh process does.

    A matmul's compile and run was a second step: measured again at JAX 0.12 with the
    seed (forked children as a zygote's, four a side, alternating), it cost each
    new jail 35-50 CPU-ms and changed no first run beyond the noise, neither a
    matrix-vector grad+jit (median 96 against 95 ms) nor an attention block's batched
    einsums (~290 ms either way), so it is gone (docs/sandbox.md, "Cost").
    """
    import jax

    apply_config(RunRequest.model_validate(WARM_REQUEST))
    jax.devices()
    return [_warm_request]


def _warm_request() -> None:
    with open(os.devnull, "w") as sink:
        saved = sys.stdout, sys.stderr, sys.stdin
        try:
            run_message(
                {"protocol": 1, "run_id": "warm-up", "request": WARM_REQUEST}, sink.fileno()
            )
        finally:
            sys.stdout, sys.stderr, sys.stdin = saved


def describe() -> dict[str, Any]:
    """What this process runs on, as ``accepted`` says it for a CPU run of one device:
    a zygote's warm child calls it after its warm-up, before any run, and the zygote
    says it in its hello (sandbox/zygote/main.py). The pool relays that, never what a
    run's own ``accepted`` claims (sandbox/zygote/handle.py)."""
    return worker_info(RunRequest.model_validate(WARM_REQUEST))
