"""The relay of one admitted run: ``RunStream`` passes the pool's events on as they
come (or a cached answer's, then the run of its measurements), ends with exactly one
``done`` whatever happens, feeds the cache and the metrics, leaves the run's public
figures and gives its place back. ``server_done`` is the one place the server makes a
``done`` itself. Made by the run service (service.py), which it knows only as
``RunOwner``: what a stream asks of the service that started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, Coroutine
from typing import Any, Protocol

from backend.app.core.errors import log_internal
from backend.app.core.logs import fields, get_logger
from backend.app.core.metrics import Metrics
from backend.app.core.settings import Settings
from backend.app.relay.figures import IR_EVENTS, RunStats
from backend.app.relay.timeouts import timeout_reason
from backend.app.storage.base import RunRow
from backend.app.tenancy.admission import Admission, Ticket
from backend.app.tenancy.caller import Caller
from backend.app.tenancy.turns import group_of
from backend.app.trust.cache import Hit, KeptEvents, ResultCache
from backend.app.trust.confirm import Confirmer
from sandbox.pool.base import RunHandle
from sandbox.protocol import (
    OUTPUT_TABLE,
    OUTPUTS,
    BadEvent,
    DoneStatus,
    RunRequest,
    ValidEvent,
    done_event,
    validate_event,
)

log = get_logger("runs")

_RESULT_TYPES = frozenset(OUTPUTS)
#: outputs that are measurements, never kept by the cache (``timing``, ``profile``): a
#: cached answer that names any is followed by a run that makes only those
MEASURED = frozenset(name for name, spec in OUTPUT_TABLE.items() if not spec.cached)
#: events of the measurements-only run that follows a cached answer
_FOLLOW_UP_TYPES = frozenset({"stage", "error", "done", *MEASURED})


class RunOwner(Protocol):
    """What a stream uses of the run service that started it (service.py's RunService)."""

    settings: Settings
    admission: Admission
    cache: ResultCache
    metrics: Metrics
    confirmer: Confirmer | None
    stats: RunStats | None

    def drain(self, handle: RunHandle) -> None: ...

    def record_later(
        self, request: RunRequest, evidence: Coroutine[Any, Any, None], leader_key: str | None
    ) -> None: ...

    def resolve(self, key: str | None) -> None: ...


def server_done(
    status: DoneStatus,
    started: float,
    reason: str = "",
    *,
    cached: bool = False,
    ms: float | None = None,
    dropped: int = 0,
) -> dict[str, Any]:
    """A ``done`` the server makes (the one place it does): a run's stream ending it,
    a run superseded before it started (routes/ws.py), a cached answer a page opens
    with (routes/pages.py). ``ms``: since ``started`` (``time.monotonic()``) unless
    given (a pool's own ``done`` re-made)."""
    if ms is None:
        ms = (time.monotonic() - started) * 1000
    return done_event(status, ms, reason, dropped, cached=cached)


class RunStream:
    """One admitted run. Iterate ``events()`` once; ``cancel()`` from anywhere."""

    def __init__(
        self,
        service: RunOwner,
        request: RunRequest,
        caller: Caller,
        handle: RunHandle | None,
        ticket: Ticket | None,
        hit: Hit | None,
        keyed: float | None = None,
    ) -> None:
        self._svc = service
        self._request = request
        self._caller = caller
        self._handle = handle
        self._ticket = ticket
        self._hit = hit
        self._cached = hit.events if hit is not None else None
        # Every fresh run is evidence for the cache, a cache: false one too.
        self._kept = (
            KeptEvents(service.cache.max_entry_bytes)
            if hit is None and service.cache.enabled
            else None
        )
        self._cancelled: str | None = None
        #: when the run was cancelled (loop time), and why the server did it itself
        self._cancelled_at: float | None = None
        self._forced: str | None = None
        #: the relay's deadline, and its wait for the pool's next event while it waits
        self._deadline = float("inf")
        self._waiting: asyncio.Timeout | None = None
        self._overdue_cancel: asyncio.Task[None] | None = None
        self._started = time.monotonic()
        #: when the server keyed the request, the JAX version that answered, and the
        #: first IR event's time since: the run's public figures (figures.py)
        self.keyed = self._started if keyed is None else keyed
        self._answered_by = request.jax_version or ""
        self._first_ir_ms: float | None = None
        self._closed = False
        self._iterated = False
        self._seen_accepted = self._seen_result = False
        #: stages timed so far, and when the last one ended, as the server saw it
        self._stages_seen: set[tuple[str, str]] = set()
        self._stage_clock = self._started
        self.leader_key: str | None = None
        self.run_id = handle.run_id if handle is not None else uuid.uuid4().hex

    @property
    def cached(self) -> bool:
        return self._cached is not None

    async def cancel(self, reason: str = "cancelled by the client") -> None:
        if self._cancelled is None:
            self._cancelled = reason
            self._cancelled_at = asyncio.get_running_loop().time()
            if self._waiting is not None and not self._waiting.expired():
                self._waiting.reschedule(self._give_up_at())
            if self._handle is not None:
                with contextlib.suppress(Exception):
                    await self._handle.cancel()

    async def events(self) -> AsyncGenerator[dict[str, Any], None]:
        self._iterated = True
        status = "abandoned"  # until a done is relayed: the consumer left first
        try:
            if self._cached is not None:
                for event in self._replay():
                    self._note_public(event)
                    yield event
                    if self._cancelled is not None:
                        break
            if self._handle is None:
                ended: DoneStatus = "cancelled" if self._cancelled else "ok"
                status = ended
                yield self._done(ended, self._cancelled or "", cached=True)
                return
            # Iterated even when cancelled already, so the pool sees the run end.
            only = _FOLLOW_UP_TYPES if self._cached is not None else None
            async with contextlib.aclosing(self._relay(self._handle, only)) as relayed:
                async for event in relayed:
                    self._observe(event)
                    if self._kept is not None:
                        self._kept.add(event)
                    if event["type"] != "done":
                        yield event
                        continue
                    status = str(event.get("status"))
                    if self._cached is not None:
                        # the results came from the cache
                        event = self._done(
                            event["status"],
                            event["reason"],
                            cached=True,
                            ms=event["ms"],
                            dropped=event.get("dropped", 0),
                        )
                    kept = self._kept.events() if self._kept is not None else None
                    self._kept = None  # nothing more to keep: the server lets it go
                    if kept is not None and status == "ok":  # after the done is sent
                        self._svc.record_later(self._request, self._evidence(kept), self.leader_key)
                    else:
                        self._svc.resolve(self.leader_key)
                    self.leader_key = None
                    yield event
                    return
        finally:
            await self.close()
            self._record(status)

    async def _evidence(self, events: list[dict[str, Any]]) -> None:
        """The run's evidence to the cache (``RunService.record_later``). An entry this
        run contradicted (a candidate or a confirmed answer, ``cache: false`` or not)
        asks for a pristine run, on this client group's account, which decides; an
        entry it agrees with waits until someone else asks for it, or its snippet is
        shared (``RunService.confirm_soon``)."""
        recorded = await self._svc.cache.record(
            self._request, self._caller.tenant, self.run_id, events
        )
        confirmer = self._svc.confirmer
        if recorded is not None and recorded.contradicted and confirmer is not None:
            confirmer.ask(self._request, recorded.key, group_of(self._caller.tenant))

    def _note_public(self, event: dict[str, Any]) -> None:
        """The run's public figures: the JAX version that answered, the first IR event."""
        kind = event["type"]
        if kind == "accepted" and isinstance(event.get("worker"), dict):
            self._answered_by = str(event["worker"].get("jax_version") or self._answered_by)
        elif kind in IR_EVENTS and self._first_ir_ms is None:
            self._first_ir_ms = (time.monotonic() - self.keyed) * 1000

    def _observe(self, event: dict[str, Any]) -> None:
        """What the server learns from an event (validated): the worker, and stage
        times measured on the server's own clock (the event's ``ms`` is the
        worker's word; a metric takes none of it), each stage once."""
        self._note_public(event)
        kind, metrics, now = event["type"], self._svc.metrics, time.monotonic()
        if kind == "accepted" and not self._seen_accepted:
            self._stage_clock = now
            self._svc.cache.learn_worker(self._request, event["worker"])
        elif kind == "stage" and (event["stage"], event["pipeline"]) not in self._stages_seen:
            self._stages_seen.add((event["stage"], event["pipeline"]))
            metrics.stage_ended(event["stage"], now - self._stage_clock)
            self._stage_clock = now
        elif kind == "done" and event.get("dropped"):
            metrics.refused_events.inc(event["dropped"])
        self._seen_accepted = self._seen_accepted or kind == "accepted"
        if not self._seen_result and kind in _RESULT_TYPES:
            self._seen_result = True
            metrics.first_event.observe(time.monotonic() - self._started)

    def _record(self, status: str) -> None:
        cached = "true" if self._cached is not None else "false"
        ms = (time.monotonic() - self._started) * 1000
        self._svc.metrics.run_ended(status, cached == "true", ms / 1000)
        stats = self._svc.stats
        if stats is not None and not self._caller.tenant.startswith("server:"):
            stats.note(
                RunRow(
                    time.time(),
                    self._answered_by or "default",
                    cached == "true",
                    status,
                    self._first_ir_ms,
                )
            )
        log.info(
            "run.done",
            extra=fields(
                run_id=self.run_id, status=status, cached=cached == "true", ms=round(ms, 1)
            ),
        )

    def _replay(self) -> list[dict[str, Any]]:
        assert self._hit is not None
        return self._hit.replay(self.run_id)

    def _done(
        self,
        status: DoneStatus,
        reason: str,
        *,
        cached: bool = False,
        ms: float | None = None,
        dropped: int = 0,
    ) -> dict[str, Any]:
        """The run's ``done`` as the server sends it, whether this stream ends the run
        itself (``ms`` since it began) or re-makes the pool's with ``cached`` (the
        pool's ``ms`` and ``dropped``)."""
        return server_done(status, self._started, reason, cached=cached, ms=ms, dropped=dropped)

    def _give_up_at(self) -> float | None:
        """When the relay stops waiting for the pool: ``cancel_grace_s`` after a
        cancel (a client's: at the run's deadline at the latest); never before one."""
        if self._cancelled_at is None:
            return None
        at = self._cancelled_at + self._svc.settings.cancel_grace_s
        return at if self._forced is not None else min(at, self._deadline)

    def _overdue(self, started: bool) -> None:
        """The pool missed its own wall clock (``started``: after the worker accepted the
        run; else its sandbox never started it): ask it to stop (it has ``cancel_grace_s``)."""
        if self._cancelled is None:
            s = self._svc.settings
            run = f"{self._request.timeout_s:g} s + {s.run_grace_s:g} s"
            self._forced = (
                f"the pool gave no result within {run}"
                if started
                else f"no sandbox started the run within {s.queue_timeout_s:g} s + {run}"
            )
            self._overdue_cancel = asyncio.get_running_loop().create_task(self.cancel(self._forced))

    async def _relay(
        self, handle: RunHandle, only: frozenset[str] | None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The pool's events, guarded: a pool that stalls past the run's own
        ``timeout_s`` + ``run_grace_s`` is cancelled, and dropped after
        ``cancel_grace_s``; the stream ends with one ``done`` in every case.

        The pool's stream is read in this task, one event at a time (no task or queue
        per event): a consumer that stops reading stops the pool's stream (and so the
        worker's pipe). The wait for its next event gives up at ``_give_up_at`` (a
        timeout that ``cancel`` sets); the deadline itself only asks the pool to stop."""
        loop = asyncio.get_running_loop()
        settings = self._svc.settings
        run_s = self._request.timeout_s + settings.run_grace_s
        # Until the worker accepts the run, its sandbox may still be starting (a zygote
        # warming up, on a busy machine tens of seconds): that wait is bounded like a
        # wait in the queue, and the run's own clock starts at `accepted`. Counting the
        # start against the run would kill it, and the run's kill retires the sandbox
        # still starting for it, so that on a loaded machine no run would ever start.
        self._deadline = loop.time() + settings.queue_timeout_s + run_s
        overdue = loop.call_at(self._deadline, self._overdue, False)
        accepted = False
        pool_events = aiter(handle.events())
        try:
            while True:
                waiting = self._waiting = asyncio.timeout_at(self._give_up_at())
                try:
                    async with waiting:
                        item: dict[str, Any] | BaseException | None = await anext(pool_events)
                except StopAsyncIteration:
                    item = None
                except Exception as exc:
                    if waiting.expired():  # cancelled, and the pool did not end in time
                        status: DoneStatus = "cancelled" if self._forced is None else "killed"
                        overdue.cancel()
                        yield self._done(status, self._forced or self._cancelled or "cancelled")
                        return
                    item = exc
                finally:
                    self._waiting = None
                if item is None:
                    overdue.cancel()
                    yield self._done("error", "the pool ended the run without a done event")
                    return
                if isinstance(item, BaseException):
                    log_internal("pool.events", item)
                    overdue.cancel()
                    yield self._done("error", f"the worker pool failed: {type(item).__name__}")
                    return
                if type(item) is not ValidEvent:
                    try:
                        # Every reader validates: a pool's events are typed and bounded
                        # here too (a remote worker's, a pool of another module's); one
                        # this process's validation made (the supervisor's gate) is.
                        item = validate_event(item)
                    except BadEvent:
                        self._svc.metrics.refused_events.inc()
                        continue
                for word in ("cached", "cached_at", "age_s"):  # the server's, never a pool's
                    item.pop(word, None)
                if item["type"] == "accepted" and not accepted and self._forced is None:
                    accepted = True
                    overdue.cancel()
                    self._deadline = loop.time() + run_s
                    overdue = loop.call_at(self._deadline, self._overdue, True)
                if only is not None and item["type"] not in only:
                    continue
                if item["type"] == "done":
                    overdue.cancel()  # the run ended: nothing is overdue
                    if self._forced is not None:
                        item = self._done("killed", self._forced)
                    elif item.get("status") == "timeout" and isinstance(item.get("reason"), str):
                        # how much more time this server gives (backend/app/relay/timeouts.py)
                        item["reason"] = timeout_reason(
                            item["reason"], self._request.timeout_s, settings.max_timeout_s
                        )
                yield item
                if item["type"] == "done":
                    return
        finally:
            overdue.cancel()
            # The pool's stream ends here too (its generator's cleanup runs now).
            close = getattr(pool_events, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()

    async def close(self) -> None:
        """Give the run's place back; a run whose events were never read is
        cancelled and drained in the background, so the pool sees it end."""
        if self._closed:
            return
        self._closed = True
        if self._handle is not None and not self._iterated:
            self._svc.drain(self._handle)
        if self._ticket is not None:
            self._svc.admission.release(self._ticket)
        self._svc.resolve(self.leader_key)
