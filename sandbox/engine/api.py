"""What a zygote calls in the engine, and nothing else (sandbox/zygote/).

The zygote imports this module once, calls ``prepare`` and ``discover_backends``
before it forks, and in its children ``warm_backend`` and ``describe`` (a warm
child, before any run) and ``run_message`` (each run). ``Engine`` states the same
functions as a type: this module is one, structurally, and a test may pass another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sandbox.engine.core import run, warmup


class Engine(Protocol):
    def prepare(self) -> None: ...

    def discover_backends(self) -> None: ...

    def warm_backend(self) -> list[Callable[[], Any]]: ...

    def describe(self) -> dict[str, Any]: ...

    def run_message(self, message: dict[str, Any], event_fd: int) -> int: ...


def prepare() -> None:
    """Import JAX and warm its tracing paths, thoroughly (once per zygote), without
    starting a backend: the zygote forks after it."""
    warmup.prepare(thorough=True)


def discover_backends() -> None:
    """Find JAX's PJRT plugins now (an entry-point scan, ~10 ms) rather than in every
    child. It registers factories and creates no backend and no thread."""
    try:
        from jax._src import xla_bridge

        xla_bridge._discover_and_register_pjrt_plugins()
    except Exception:  # a private API: if it moves, each child does it itself
        pass


def warm_backend() -> list[Callable[[], Any]]:
    """Start the CPU backend as a run asks for it (one device); returns the warm-up
    step (the engine's warm-up request, ``warmup.WARM_REQUEST``)."""
    return warmup.warm_backend()


def share_eager(fd: int) -> bool:
    """This process and every child it forks record what a run's set-up compiles
    eagerly and misses, for the template's eager compiler, and report it on ``fd``
    (the zygote's pipe; core/shared_eager.py): hooks in JAX's Python only (no backend,
    no thread), so a zygote may call it before it forks. False where this JAX has no
    such hooks."""
    from sandbox.engine.core import shared_eager

    return shared_eager.connect(fd)


def describe() -> dict[str, Any]:
    """What this process runs on, as ``accepted`` says it for a CPU run of one device."""
    return warmup.describe()


def run_message(message: dict[str, Any], event_fd: int) -> int:
    """One run: the worker message in, events written to ``event_fd``; the exit code."""
    return run.run_message(message, event_fd)
