"""The server's fake pool: sandbox.pool.fake's, with events that tell runs apart.

Markers in the request's code steer a run (see sandbox/pool/fake.py): ``# fake:
slow=0.2``, ``hang``, ``error``, ``nodone``, ``ignore-cancel``; and here ``held``: the
run waits for the test's ``pool.release()`` (so that a test waits for an event, never
races a time window). A run's jaxpr text
carries the length of its code and its value is a function of its request, as a
real engine's is; with ``# fake: random`` the value is ``run N`` instead (N counts
the pool's runs), like code that draws a random number; ``# fake: names-run`` prints
the run's own id. Timings always carry N, so a test can tell a fresh one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

from backend.app.relay.timeouts import LONGER
from sandbox.pool.fake import WORKER, FakeRun
from sandbox.pool.fake import FakePool as _FakePool
from sandbox.protocol import RunRequest

__all__ = ["WORKER", "FakePool", "FakeRun"]


def numbered_script(run: FakeRun) -> list[dict[str, Any]]:
    random = run._marker("random") is not None
    value = f"run {run.number}" if random else f"value of {len(run.request.code)} characters"
    events: list[dict[str, Any]] = [
        {"type": "stage", "stage": "trace", "ms": 1.5},
        {
            "type": "jaxpr",
            "text": f"{{ lambda ; . let  in ({len(run.request.code)},) }}",
            "sources": [],
        },
        {"type": "value", "repr": value, "tree": []},
    ]
    if run._marker("names-run") is not None:
        events.insert(0, {"type": "stdout", "text": f"I am {run.run_id}\n", "stage": "exec"})
    if "timing" in run.request.outputs:
        row = {"label": "f", "pipeline": "main", "runs": run.number, "batches": 1}
        row.update(median_ms=0.1, min_ms=0.1, iqr_ms=0.0)
        events.append({"type": "timing", "rows": [row]})
    if run._marker("error") is not None:
        events.append(
            {
                "type": "error",
                "stage": "exec",
                "kind": "NameError",
                "message": "x",
                "line": 1,
                "hint": "",
            }
        )
    return events


class HeldRun(FakeRun):
    """A run with ``# fake: held``: it starts (the pool counts it), then waits for the
    test to ``release()`` its pool before it streams anything. A test that needs a run
    to be running while it does something waits for that event, not for a time."""

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        if self._marker("held") is not None:
            pool = self.pool
            assert isinstance(pool, FakePool)
            pool.held += 1
            try:
                while not pool.released.is_set():  # set from the test's own thread
                    await asyncio.sleep(0.01)
            finally:
                pool.held -= 1
        async for event in super().events():
            yield event

    async def _play(self) -> AsyncIterator[dict[str, Any]]:
        async for event in super()._play():
            yield event
        if self._marker("timeout") is not None and self._end is not None and self._end[0] == "ok":
            # what the supervisor says when the wall clock runs out (its relay's words)
            reason = (
                f"wall clock {self.request.timeout_s:g} s, reached in the compile stage "
                f"(stages done: trace 0.0 s){LONGER}"
            )
            self._end = ("timeout", self.request.timeout_s * 1000, reason)


class FakePool(_FakePool):
    def __init__(self, max_concurrent: int = 4) -> None:
        super().__init__(max_concurrent, script=numbered_script)
        #: set by the test: the ``# fake: held`` runs go on
        self.released = threading.Event()
        #: how many held runs are waiting now
        self.held = 0

    def release(self) -> None:
        self.released.set()

    async def submit(self, request: RunRequest, tenant: str, **options: Any) -> FakeRun:
        run = await super().submit(request, tenant, **options)
        run.__class__ = HeldRun  # the same run, with the held marker honoured
        return run


class SlotFakePool(FakePool):
    """The fake pool with a warm process per tenant, as the jailed pool keeps:
    ``tenant_slots`` places, so admission's turns apply (backend/app/tenancy/admission.py,
    TenantTurns). Start a server on it with ``--pool tests.server.fakes:SlotFakePool``."""

    tenant_slots = 4

    def __init__(self, max_concurrent: int = 8) -> None:
        super().__init__(max_concurrent)
        self.turns_ended: list[str] = []

    def end_turn(self, tenant: str) -> None:
        self.turns_ended.append(tenant)
