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


class PristineUnsupported(Exception):
    """This pool cannot make a pristine run (see ``Pool.submit``)."""


class RunHandle(Protocol):
    run_id: str

    def events(self) -> AsyncIterator[dict[str, Any]]:
        """The run's events as they happen, ``done`` last. Iterate once."""
        ...

    async def cancel(self) -> None:
        """Stop the run; its stream then ends with ``done`` status ``cancelled``."""
        ...


class Pool(Protocol):
    #: Whether ``submit(..., pristine=True)`` is honoured (else it raises
    #: PristineUnsupported): the jailed warm pool, the unjailed subprocess pool (dev
    #: use) and the fake; never the Redis pool, whose remote workers' word is all it has.
    @property
    def makes_pristine_runs(self) -> bool: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def submit(
        self, request: RunRequest, tenant: str, *, pristine: bool = False
    ) -> RunHandle:
        """Start a run for ``tenant``; raises PoolFull when it cannot.

        ``pristine``: the run is evidence for others (the server's confirmer): a fresh
        process forked from a zygote that never ran anyone's code, in a jail that never
        served a tenant, JAX's persistent compilation cache off for the whole run, the
        zygote and its jail retired after it, whatever happened. ``tenant`` is then only
        who asked (no tenant's zygote or quota is used). PoolFull when no such zygote
        is ready now (retry later); PristineUnsupported from a pool that cannot."""
        ...

    def stats(self) -> dict[str, Any]:
        """Sizes and counts for /metrics and /api/v1/backends."""
        ...
