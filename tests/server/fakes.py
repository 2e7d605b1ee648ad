"""A tiny in-process pool for fast unit tests of the server (no processes, no JAX).

Its behaviour is steered by markers in the request's code:
``# fake: slow=0.2`` waits that long between events; ``# fake: hang`` never finishes
until cancelled; ``# fake: error`` ends with an error; ``# fake: nodone`` ends
without a ``done``; ``# fake: ignore-cancel`` does not react to cancel.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

from sandbox.pool.base import PoolFull
from sandbox.protocol import RunRequest, done_event

WORKER = {
    "backend": "cpu",
    "platform": "cpu",
    "device_kind": "cpu",
    "devices": 1,
    "jax_version": "0.0.fake",
    "jaxlib_version": "0.0.fake",
}


class FakeRun:
    def __init__(self, pool: FakePool, request: RunRequest, tenant: str) -> None:
        self.pool, self.request, self.tenant = pool, request, tenant
        self.run_id = uuid.uuid4().hex
        self.number = pool.total
        self._cancelled = asyncio.Event()

    async def cancel(self) -> None:
        self._cancelled.set()

    def _marker(self, name: str) -> str | None:
        m = re.search(rf"# fake: {name}(?:=(\S+))?", self.request.code)
        return None if m is None else (m.group(1) or "")

    async def _pause(self, seconds: float) -> bool:
        """Wait; True if cancelled meanwhile."""
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
            slow = float(self._marker("slow") or 0)
            worker = dict(self.pool.worker, devices=self.request.devices)
            yield {"type": "accepted", "run_id": self.run_id, "worker": worker, "pipeline": "main"}
            events: list[dict[str, Any]] = [
                {"type": "stage", "stage": "trace", "ms": 1.5, "pipeline": "main"},
                {
                    "type": "jaxpr",
                    "text": f"{{ lambda ; . let  in ({len(self.request.code)},) }}",
                    "sources": [],
                    "pipeline": "main",
                },
                {"type": "value", "repr": f"run {self.number}", "tree": [], "pipeline": "main"},
            ]
            if "timing" in self.request.outputs:
                events.append(
                    {
                        "type": "timing",
                        "rows": [{"label": "f", "runs": self.number}],
                        "pipeline": "main",
                    }
                )
            if self._marker("error") is not None:
                events.append(
                    {
                        "type": "error",
                        "stage": "exec",
                        "kind": "NameError",
                        "message": "x",
                        "line": 1,
                        "hint": "",
                        "pipeline": "main",
                    }
                )
            for event in events:
                if await self._pause(slow):
                    yield done_event("cancelled", 0, "cancelled by the client")
                    return
                yield event
            if self._marker("hang") is not None:
                await self._cancelled.wait()
                yield done_event("cancelled", 0, "cancelled by the client")
                return
            if self._marker("nodone") is not None:
                return
            yield done_event("error" if self._marker("error") is not None else "ok", 1.0)
        finally:
            self.pool.running -= 1
            self.pool.finished += 1


class FakePool:
    def __init__(self, max_concurrent: int = 4) -> None:
        self.capacity = max_concurrent
        self.running = 0
        self.total = 0
        self.finished = 0
        self.tenants: list[str] = []
        self.requests: list[RunRequest] = []
        self.started = self.closed = False
        self.worker = dict(WORKER)

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True

    async def submit(self, request: RunRequest, tenant: str) -> FakeRun:
        # Capacity counts submitted-but-unfinished runs, as a real pool does.
        if self.total - self.finished >= self.capacity:
            raise PoolFull("fake pool full", retry_after_s=0.05)
        self.total += 1
        self.tenants.append(tenant)
        self.requests.append(request)
        return FakeRun(self, request, tenant)

    def stats(self) -> dict[str, Any]:
        return {
            "kind": "fake",
            "running": self.running,
            "capacity": self.capacity,
            "runs": self.total,
        }
