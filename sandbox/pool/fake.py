"""A pool that runs nothing: scripted events, for fast tests of what sits on a pool.

By default each run streams ``accepted``, a ``stage``, a ``jaxpr``, a ``value`` and
``done ok``. A test may pass its own ``script`` (a list of events, or a function of
the request returning one). Markers in the request's code steer a run:
``# fake: slow=0.2`` waits that long before each event; ``# fake: start=1`` that long
before ``accepted`` (a sandbox still starting); ``# fake: hang`` never
finishes until cancelled; ``# fake: error`` ends with an error; ``# fake: nodone``
ends without ``done`` (a broken pool, for the server's own guard);
``# fake: ignore-cancel`` does not react to cancel (a worker that does not answer).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from sandbox.pool.base import PoolFull
from sandbox.protocol import DoneStatus, RunRequest, done_event

WORKER = {
    "backend": "cpu",
    "platform": "cpu",
    "device_kind": "cpu",
    "devices": 1,
    "jax_version": "0.0.fake",
    "jaxlib_version": "0.0.fake",
}
#: a run's events after ``accepted``: a list, or a function of the run (its
#: ``request`` and ``number``, 1 for the pool's first run) returning one
Script = list[dict[str, Any]] | Callable[["FakeRun"], list[dict[str, Any]]]
CANCELLED: tuple[DoneStatus, float, str] = ("cancelled", 0.0, "cancelled by the client")


def default_script(run: FakeRun) -> list[dict[str, Any]]:
    request = run.request
    events: list[dict[str, Any]] = [
        {"type": "stage", "stage": "trace", "ms": 1.0},
        {"type": "jaxpr", "text": "{ lambda ; a:f32[]. let  in (a,) }", "sources": []},
        {"type": "value", "repr": "Array(1., dtype=float32)", "tree": []},
    ]
    if "# fake: error" in request.code:
        events.append(
            {"type": "error", "stage": "exec", "kind": "NameError", "message": "fake",
             "line": 1, "hint": None, "doc_url": None}
        )  # fmt: skip
    return events


class FakeRun:
    def __init__(
        self, pool: FakePool, request: RunRequest, tenant: str, pristine: bool = False
    ) -> None:
        self.pool, self.request, self.tenant = pool, request, tenant
        #: whether it was submitted as a pristine run (the fake runs it like any other)
        self.pristine = pristine
        self.run_id = uuid.uuid4().hex
        self.number = pool.total
        self._cancelled = asyncio.Event()
        #: how the run ends: status, ms, reason (None: with no ``done``)
        self._end: tuple[DoneStatus, float, str] | None = None

    def _marker(self, name: str) -> str | None:
        m = re.search(rf"# fake: {name}(?:=(\S+))?", self.request.code)
        return None if m is None else (m.group(1) or "")

    async def cancel(self) -> None:
        self._cancelled.set()

    async def _wait(self, seconds: float) -> bool:
        """Sleep; True when cancelled meanwhile."""
        if self._marker("ignore-cancel") is not None:
            await asyncio.sleep(seconds)
            return False
        try:
            await asyncio.wait_for(self._cancelled.wait(), seconds)
            return True
        except TimeoutError:
            return False

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        self.pool.running += 1
        try:
            async for event in self._play():
                yield event
            if self._end is not None:  # None: ``# fake: nodone``
                status, ms, reason = self._end
                yield done_event(status, ms, reason)  # the one place the fake makes it
        finally:
            self.pool.running -= 1
            self.pool.finished += 1

    async def _play(self) -> AsyncIterator[dict[str, Any]]:
        """The run's events before ``done``; how it ends is left in ``_end``."""
        script = self.pool.script
        events = script(self) if callable(script) else list(script)
        slow = float(self._marker("slow") or 0)
        worker = dict(self.pool.worker, devices=self.request.devices)
        self._end = CANCELLED
        if await self._wait(float(self._marker("start") or 0)):  # a sandbox starting
            return
        yield {"type": "accepted", "run_id": self.run_id, "worker": worker, "pipeline": "main"}
        for event in events:
            if await self._wait(slow):
                return
            yield {"pipeline": "main", **event}
        if self._marker("hang") is not None:
            await self._cancelled.wait()
            return
        if self._marker("nodone") is not None:
            self._end = None
            return
        failed = any(e.get("type") == "error" for e in events)
        self._end = ("error", 1.0, "the code raised an error") if failed else ("ok", 1.0, "")


class FakePool:
    """Implements sandbox.pool.base.Pool and MakesPristineRuns without processes or
    JAX. ``pristine`` records, for each submitted run, whether it was asked to be
    pristine."""

    def __init__(self, max_concurrent: int = 4, script: Script | None = None) -> None:
        self.capacity = max_concurrent
        self.script: Script = script if script is not None else default_script
        self.running = self.total = self.finished = 0
        self.tenants: list[str] = []
        self.requests: list[RunRequest] = []
        self.pristine: list[bool] = []
        self.started = self.closed = False
        self.worker = dict(WORKER)

    def for_environment(self, env: Any) -> FakePool:
        """The fake of another JAX version's pool (for the versioned pool's tests)."""
        pool = FakePool(self.capacity, self.script)
        pool.worker = dict(self.worker, jax_version=env.version)
        return pool

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True

    async def submit_pristine(self, request: RunRequest, asked_by: str) -> FakeRun:
        return await self.submit(request, asked_by, pristine=True)

    async def submit(self, request: RunRequest, tenant: str, *, pristine: bool = False) -> FakeRun:
        """Every run goes through here, a pristine one too (``submit_pristine``), so a
        test's subclass that changes what a run does sees each; ``pristine`` is the
        fake's record of which was which, no option of the Pool interface."""
        if self.total - self.finished >= self.capacity:  # submitted but unfinished
            raise PoolFull("fake pool full", retry_after_s=0.05)
        self.total += 1
        self.tenants.append(tenant)
        self.requests.append(request)
        self.pristine.append(pristine)
        return FakeRun(self, request, tenant, pristine)

    def stats(self) -> dict[str, Any]:
        return {
            "kind": "fake",
            "running": self.running,
            "capacity": self.capacity,
            "runs": self.total,
            "pristine_runs": sum(self.pristine),
        }
