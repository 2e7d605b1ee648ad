"""The one pool interface: submit a run, get an async stream of events, cancel.

Implementations: ``subprocess`` (one fresh child process per run), and the ones
that follow it (jailed warm zygotes, Redis Streams) behind the same interface, and a
fake for fast unit tests. Every stream ends with exactly one ``done`` event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from sandbox.protocol import RunRequest


class PoolFull(Exception):
    """The pool cannot take another run now; retry after ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RunHandle(Protocol):
    run_id: str

    def events(self) -> AsyncIterator[dict[str, Any]]:
        """The run's events as they happen, ``done`` last. Iterate once."""
        ...

    async def cancel(self) -> None:
        """Stop the run; its stream then ends with ``done`` status ``cancelled``."""
        ...


class Pool(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def submit(self, request: RunRequest, tenant: str) -> RunHandle:
        """Start a run for ``tenant``; raises PoolFull when it cannot."""
        ...

    def stats(self) -> dict[str, Any]:
        """Sizes and counts for /metrics and /api/v1/backends."""
        ...
