"""The one pool interface: submit a run, get an async stream of events, cancel.

A pool is what ``sandbox.assembly.pool_registry`` builds by name: ``zygote`` (jailed warm
zygotes), ``subprocess`` (a fresh unjailed process per run, development only),
``redis`` (remote ``jaxplay worker`` machines, sandbox/queue/), ``fake`` (scripted
events, for fast tests), and ``VersionedPool`` around a local one (one pool per JAX
version). Every pool has the methods of ``Pool``. What only some pools can do is an
optional capability below, a Protocol of its own: a caller asks
``isinstance(pool, TakesTurns)`` and so on, never probes for a method by name. A run
whose caller needs a capability the pool lacks is refused with an exception that
says so (``submit_pristine`` below: PristineUnsupported naming the pool's kind).

The handle contract (every pool keeps it; tests/pool/test_contract.py checks it
against each registered kind):

- ``events()`` yields the run's events in order and ends with exactly one ``done``
  (nothing after it), whatever happens: the run ends, fails, is killed, or its
  worker is lost. The first event is ``accepted``.
- After ``cancel()``, the stream ends within ``CANCEL_GRACE_S`` (the server's
  ``cancel_grace_s`` default) with a ``done`` whose ``status`` is ``cancelled``,
  unless the run had ended already (then its own ``done`` stands). ``cancel()`` may be
  called more than once, and after the end.
- ``submit`` raises ``PoolFull`` (with a retry hint) when the pool cannot take the run
  now; it never blocks waiting for room.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from sandbox.protocol import RunRequest

if TYPE_CHECKING:
    from sandbox.environments.versions import Environment, Row
    from sandbox.pool.budget import Budget

#: How long after ``cancel()`` a handle may take to end with ``done`` ``cancelled``
#: (the server drops a run that takes longer: ``JAXPLAY_CANCEL_GRACE_S``, this default).
CANCEL_GRACE_S = 2.0


class PoolFull(Exception):
    """The pool cannot take another run now; retry after ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class PristineUnsupported(Exception):
    """This pool cannot make a pristine run (it is no ``MakesPristineRuns``)."""


class RunHandle(Protocol):
    """One submitted run (the contract: this module's docstring)."""

    run_id: str

    def events(self) -> AsyncIterator[dict[str, Any]]:
        """The run's events as they happen, ``accepted`` first, exactly one ``done``
        last. Iterate once."""
        ...

    async def cancel(self) -> None:
        """Stop the run; its stream then ends with ``done`` status ``cancelled``
        within ``CANCEL_GRACE_S`` (unless it had ended already)."""
        ...


class Pool(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def submit(self, request: RunRequest, tenant: str) -> RunHandle:
        """Start a run for ``tenant``; raises PoolFull when it cannot.

        A single-use ``tenant`` (sandbox/protocol/tenants.py): the run's process, and a
        pool's zygote and jail, serve no other run."""
        ...

    def stats(self) -> dict[str, Any]:
        """Sizes and counts for /metrics and /api/v1/backends."""
        ...


# --- optional capabilities ----------------------------------------------------------


@runtime_checkable
class MakesPristineRuns(Protocol):
    """A pool that makes pristine runs: the jailed warm pool, the unjailed subprocess
    pool (development use) and the fake; never the Redis pool, whose remote workers'
    word is all it has (sandbox/queue/client_pool.py). A versioned pool is one exactly
    when its default version's pool is (sandbox/pool/versioned.py)."""

    async def submit_pristine(self, request: RunRequest, asked_by: str) -> RunHandle:
        """Start a run that is evidence for others (the server's confirmer): a fresh
        process forked from a zygote that never ran anyone's code, in a jail that never
        served a tenant, the zygote and its jail retired after it, whatever happened;
        nothing in the run tells it from a new tenant's first run (issue 33). It takes a
        ready spare or a free place, never an active tenant's. ``asked_by`` is only who
        asked (no tenant's zygote or quota is used). PoolFull when no such zygote is
        ready now (retry later); it never waits for one."""
        ...


async def submit_pristine(pool: Pool, request: RunRequest, asked_by: str) -> RunHandle:
    """A pristine run of ``request`` in ``pool``; PristineUnsupported, naming the
    pool's kind, from a pool without the capability."""
    if not isinstance(pool, MakesPristineRuns):
        kind = pool.stats().get("kind", type(pool).__name__)
        raise PristineUnsupported(f"the {kind} pool makes no pristine runs")
    return await pool.submit_pristine(request, asked_by)


@runtime_checkable
class WaitsReady(Protocol):
    """A pool that warms up after ``start`` (the jailed warm pool's spares)."""

    async def ready(self, timeout_s: float = 120.0) -> None:
        """Wait until the pool's warm processes are up."""
        ...


@runtime_checkable
class SignalsFree(Protocol):
    """A pool that says when a run's place frees, so a queued run starts at once
    rather than when the ended run's events have all been relayed."""

    def on_free(self, listener: Callable[[], None]) -> None: ...


@runtime_checkable
class TakesTurns(Protocol):
    """A pool that keeps a warm process per tenant, ``tenant_slots`` of them: the
    server refuses a new tenant while every one is in use (backend/app/tenancy/admission.py)."""

    @property
    def tenant_slots(self) -> int:
        """How many tenants can hold a process at once (0: no turns are needed)."""
        ...

    def end_turn(self, tenant: str) -> None:
        """``tenant``'s turn is over while others wait: free its idle processes."""
        ...


@runtime_checkable
class RunsVersions(Protocol):
    """A pool that runs several JAX versions (sandbox/pool/versioned.py)."""

    def resolve_version(self, version: str | None) -> str:
        """The version a request runs on; VersionUnavailable when it cannot here."""
        ...

    def versions(self) -> list[Row]:
        """Each version installed or installable."""
        ...

    def running_versions(self) -> list[str]:
        """Versions whose pool is up now, the default first."""
        ...


@runtime_checkable
class ChoosesLibraries(Protocol):
    """A pool that runs a request's choice of library versions (sandbox/environments/library_choices.py)."""

    def resolve_libraries(
        self, version: str | None, choices: dict[str, str]
    ) -> tuple[tuple[str, str], ...]:
        """The alternatives a request picks (defaults dropped); LibraryUnavailable
        (a ValueError) naming what is offered when it cannot run them here."""
        ...

    def library_menu(self, version: str) -> dict[str, dict[str, object]]:
        """Library -> ``default`` and ``alternatives`` a request on ``version`` may pick."""
        ...


@runtime_checkable
class WatchesRuns(Protocol):
    """A pool with a shared record of runs: a run submitted through one server
    replica can be followed through another (the Redis pool)."""

    async def watch(self, run_id: str) -> RunHandle | None:
        """A handle on the run's events from the first; None if unknown (or expired)."""
        ...


@runtime_checkable
class ForEnvironment(Protocol):
    """A pool that can make its twin for another JAX version's environment."""

    def for_environment(self, env: Environment) -> Pool: ...


@runtime_checkable
class SharesBudget(Protocol):
    """A pool whose places and zygotes come from a machine-wide budget, shared by
    every JAX version's pool (sandbox/pool/budget.py)."""

    budget: Budget
