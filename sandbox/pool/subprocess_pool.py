"""A pool that starts a fresh worker process for every run (no warm zygotes).

The simplest real pool: what `jaxplay run` uses until the jailed warm pool exists,
and the baseline that the warm pool's benchmark compares against.

It makes pristine runs (``submit_pristine``, sandbox/pool/base.py's
MakesPristineRuns): every run is a new process
that nobody's run used before, and no run has JAX's persistent compilation cache (a
developer's ``JAX_COMPILATION_CACHE_DIR`` and the like are left out of every run's
environment: a cache there would be shared by every run), so a pristine run looks
like any other to its code. It has no jail, though: an earlier run could have changed
any file the process reads (development use only, as the whole pool).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

from sandbox.pool.base import PoolFull, RunHandle
from sandbox.protocol import RunRequest
from sandbox.supervisor import OutputLimits, SupervisedRun

WORKER_ARGV = (sys.executable, "-m", "sandbox.engine")
#: JAX's settings of its persistent compilation cache, by their environment names
_CACHE_VARIABLES = ("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE", "JAX_ENABLE_COMPILATION_CACHE")


def _run_environment() -> dict[str, str]:
    """This process's environment without JAX's persistent cache settings."""
    return {k: v for k, v in os.environ.items() if not k.upper().startswith(_CACHE_VARIABLES)}


class SubprocessPool:
    def __init__(
        self,
        max_concurrent: int = 2,
        limits: OutputLimits | None = None,
        *,
        python: str | None = None,
    ) -> None:
        #: the interpreter of the worker (another JAX version's environment), or ours
        self._argv = (python, *WORKER_ARGV[1:]) if python else WORKER_ARGV
        self._max = max_concurrent
        self._limits = limits or OutputLimits()
        self._running = 0
        self._total = 0
        self._pristine = 0

    def for_environment(self, env: Any) -> SubprocessPool:
        """The same pool running another JAX version's interpreter (sandbox/environments/versions.py)."""
        return SubprocessPool(self._max, self._limits, python=env.python)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def submit(self, request: RunRequest, tenant: str) -> RunHandle:
        if self._running >= self._max:
            raise PoolFull(f"{self._running} runs in progress", retry_after_s=1.0)
        run = SupervisedRun(
            self._argv, request, uuid.uuid4().hex, limits=self._limits, env=_run_environment()
        )
        return _Counted(run, self)

    async def submit_pristine(self, request: RunRequest, asked_by: str) -> RunHandle:
        """A run like any other: each is a fresh process, none with a persistent cache."""
        handle = await self.submit(request, asked_by)
        self._pristine += 1
        return handle

    def stats(self) -> dict[str, Any]:
        return {
            "kind": "subprocess",
            "running": self._running,
            "capacity": self._max,
            "runs": self._total,
            "pristine_runs": self._pristine,
        }


class _Counted:
    """Wraps a run so the pool knows how many are in flight."""

    def __init__(self, run: SupervisedRun, pool: SubprocessPool) -> None:
        self._run, self._pool = run, pool
        self.run_id = run.run_id
        pool._running += 1
        pool._total += 1

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        try:
            async for event in self._run.events():
                yield event
        finally:
            self._pool._running -= 1

    async def cancel(self) -> None:
        await self._run.cancel()
