"""The run service: one path from a validated request to a stream of events.

Both the REST routes and the WebSocket use it. ``start`` does everything that can
refuse a run (rate, tenant limit, queue) before a single event goes out, so a
refusal is a clean 429/503; the ``RunStream`` it returns (stream.py) relays the pool's events as
they come, ends with exactly one ``done`` whatever happens, feeds the cache and the
metrics, and gives the run's place back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from backend.app.core.errors import ApiError, log_internal
from backend.app.core.metrics import Metrics
from backend.app.core.settings import Settings
from backend.app.relay.figures import RunStats
from backend.app.relay.stream import MEASURED, RunStream
from backend.app.tenancy.admission import Admission
from backend.app.tenancy.caller import Caller
from backend.app.tenancy.turns import group_of
from backend.app.trust.cache import Hit, ResultCache
from backend.app.trust.confirm import Confirmer
from sandbox.pool.base import ChoosesLibraries, Pool, RunHandle, RunsVersions
from sandbox.protocol import RunRequest
from sandbox.protocol.tenants import single_use


def measured_outputs(request: RunRequest) -> list[str]:
    """The outputs of ``request`` that no cache entry holds (they are measured anew)."""
    return [name for name in request.outputs if name in MEASURED]


def follow_up_request(request: RunRequest) -> RunRequest:
    """The run that follows a cached answer of ``request``: the same code, asking only
    for what it refreshes (its measurements) and nothing else. ``checks`` go (they
    are the ``checks`` output, which the cache served; kept, they would run and report
    an ``execute`` stage that this run's outputs do not make, and the gate would refuse
    it as forged), and so does every other output's work. Validated afresh, so the
    request's own rules (``checks`` <-> the ``checks`` output) hold for it too."""
    data = request.model_dump()
    data.update(outputs=measured_outputs(request), checks=[], trace_values_compare=False)
    return RunRequest.model_validate(data)


@dataclass(frozen=True)
class _DevicelessTarget:
    """A request field naming hardware compiled for without it, allowed only where the
    operator's setting lists the name (off by default: an empty list)."""

    field: str  # the RunRequest field, e.g. "gpu_target"
    setting: str  # the Settings list the operator enables names in
    label: str  # "GPU" or "TPU": the words of the error and the docs section's title

    def offered(self, settings: Settings) -> list[str]:
        offered: list[str] = getattr(settings, self.setting)
        return offered

    def check(self, request: RunRequest, settings: Settings) -> None:
        name = getattr(request, self.field)
        offered = self.offered(settings)
        if name is None or name in offered:
            return
        raise ApiError(
            422,
            "invalid_request",
            f"{self.field} {name!r} is not enabled on this server; "
            + (
                f"it offers {offered}"
                if offered
                else f"deviceless {self.label} compiles are off (an operator enables them with "
                f'JAXPLAY_{self.setting.upper()}: docs/api.md, "Deviceless {self.label} compiles")'
            ),
            field=self.field,
        )


#: what ``prepare`` checks, and what ``GET /api/v1/backends`` lists as offered
DEVICELESS_TARGETS = (
    _DevicelessTarget("tpu_topology", "tpu_topologies", "TPU"),
    _DevicelessTarget("gpu_target", "gpu_targets", "GPU"),
)


class RunService:
    def __init__(
        self,
        settings: Settings,
        pool: Pool,
        admission: Admission,
        cache: ResultCache,
        metrics: Metrics,
        confirmer: Confirmer | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.admission = admission
        self.cache = cache
        self.metrics = metrics
        self.confirmer = confirmer
        #: the public figures (backend/app/relay/figures.py), when the factory keeps them
        self.stats: RunStats | None = None
        self._draining: set[asyncio.Task[None]] = set()
        #: runs' evidence being written to the cache, after their done was sent
        self._recording: set[asyncio.Task[None]] = set()
        #: cache key -> resolved when the run computing it ends (single flight)
        self._leaders: dict[str, asyncio.Future[None]] = {}

    def drain(self, handle: RunHandle) -> None:
        async def run() -> None:
            with contextlib.suppress(Exception):
                await handle.cancel()
                async with asyncio.timeout(self.settings.cancel_grace_s):
                    async for _ in handle.events():
                        pass

        task = asyncio.get_running_loop().create_task(run())
        self._draining.add(task)
        task.add_done_callback(self._draining.discard)

    async def aclose(self) -> None:
        """Wait for runs being drained, and for their evidence (at shutdown)."""
        if self._draining:
            await asyncio.wait(set(self._draining), timeout=self.settings.cancel_grace_s + 1)
        if self._recording:
            await asyncio.wait(set(self._recording), timeout=self.settings.cancel_grace_s + 1)

    @property
    def evidence_pending(self) -> int:
        """Runs whose evidence is being written (``record_later``)."""
        return len(self._recording)

    def record_later(
        self, request: RunRequest, evidence: Coroutine[Any, Any, None], leader_key: str | None
    ) -> None:
        """Write a run's evidence to the cache (``evidence``) after its ``done`` is sent,
        not before: the client has its answer a write sooner. Nothing else changes: the
        run's key stays led until the write is done (``leader_key``, the key the run
        led, or else the request's key, when no other run leads it), so a request for
        it that comes meanwhile waits for the write and then finds what it would have
        found had the write come first."""
        key = leader_key
        if key is None:
            key = self.cache.key_for(request)
            if key is not None and key not in self._leaders:
                self._leaders[key] = asyncio.get_running_loop().create_future()
            else:
                key = None  # another run leads it: its end resolves it
        task = asyncio.get_running_loop().create_task(evidence)
        self._recording.add(task)

        def written(task: asyncio.Task[None]) -> None:
            self._recording.discard(task)
            self.resolve(key)
            error = None if task.cancelled() else task.exception()
            if error is not None:
                log_internal("cache.record", error)

        task.add_done_callback(written)

    def prepare(self, request: RunRequest) -> RunRequest:
        """The request as it will run: ``timeout_s`` capped by the server's maximum; a
        ``jax_version`` the pool cannot run, or a ``tpu_topology`` or ``gpu_target`` the
        operator did not enable, is a 422 that says what to do."""
        if isinstance(self.pool, RunsVersions):
            from sandbox.pool.versioned import VersionUnavailable

            try:
                self.pool.resolve_version(request.jax_version)
            except VersionUnavailable as exc:
                raise ApiError(422, "invalid_request", str(exc), field="jax_version")
        if (
            request.libraries
        ):  # another version of a library (sandbox/environments/library_choices.py)
            if not isinstance(self.pool, ChoosesLibraries):
                raise ApiError(
                    422, "invalid_request",
                    "this server runs only each JAX version's default libraries",
                    field="libraries",
                )  # fmt: skip
            try:
                self.pool.resolve_libraries(request.jax_version, request.libraries)
            except ValueError as exc:  # LibraryUnavailable
                raise ApiError(422, "invalid_request", str(exc), field="libraries")
        for rule in DEVICELESS_TARGETS:
            rule.check(request, self.settings)
        if request.numerics_max_values > self.settings.numerics_max_values:
            # the operator's cap on the numerics output's size (its shadow's memory)
            request = request.model_copy(
                update={"numerics_max_values": self.settings.numerics_max_values}
            )
        if request.timeout_s > self.settings.max_timeout_s:
            return request.model_copy(update={"timeout_s": self.settings.max_timeout_s})
        return request

    async def start(
        self, request: RunRequest, caller: Caller, *, use_cache: bool = True
    ) -> RunStream:
        """Admit the run (or raise Overloaded) and return its stream of events."""
        keyed = time.monotonic()  # the public first-output latency counts from here
        request = self.prepare(request)
        self.admission.check_rate(caller.rate_key)
        hit: Hit | None = None
        leader_key: str | None = None
        if not use_cache or not self.cache.enabled:
            self.metrics.cache.labels("bypass").inc()
        else:
            hit, leader_key = await self._consult_cache(request, caller.tenant)
        if hit is not None and not measured_outputs(request):
            return RunStream(self, request, caller, None, None, hit, keyed)
        try:
            stream = await self._admit(request, caller, hit)
        except BaseException:
            self.resolve(leader_key)
            raise
        stream.leader_key = leader_key
        stream.keyed = keyed
        return stream

    async def _consult_cache(
        self, request: RunRequest, tenant: str
    ) -> tuple[Hit | None, str | None]:
        """A confirmed answer, or None and the key this run leads (single flight).

        A candidate asked for by anyone but the tenant whose run made it is a request
        worth confirming: it asks for a pristine run (not for every edit a person
        makes: their own re-runs never ask), charged to this request's client group
        (backend/app/trust/pristine_lines.py). A request waits for a pristine run only when
        that run has already started (then at most ``cache_join_wait_s``), never for
        one waiting in line: it runs at once instead, so nobody's answer waits on
        others' pristine work, and an ask's own wait cannot tell a prober whether
        someone ran the request. Identical requests that arrive together wait for the
        one running (a shared link opened by many at once), then look again: a
        confirmed answer is theirs; otherwise (an entry not confirmed yet, an unstable
        one, or a wait past ``cache_join_wait_s``) each runs on its own. The leader's
        wait ends when its run's ``done`` arrives, not when its client has read every
        event: a slow reader holds no one. The tenant whose run made the entry never
        leads (its run is no evidence, so nobody should wait for it): it joins
        another's run, or runs on its own."""
        s = self.settings
        deadline = time.monotonic() + min(s.queue_timeout_s, s.cache_join_wait_s)
        joined = False
        asked = False
        while True:
            state, hit = await self.cache.lookup(request, tenant)
            if hit is not None:
                self.metrics.cache.labels("hit").inc()
                return hit, None
            key = self.cache.key_for(request) if state != "unstable" else None
            leader = self._leaders.get(key) if key is not None else None
            if leader is None and key is not None and self.confirmer is not None and not asked:
                leader = self.confirmer.running(key)
                if leader is None and state == "candidate":
                    # it may start at once (then the next request for it joins it);
                    # this one never waits for the run its own ask started
                    asked = True
                    self.confirmer.ask(request, key, group_of(tenant))
            remaining = deadline - time.monotonic()
            if key is not None and leader is None and state not in ("own", "candidate"):
                self._leaders[key] = asyncio.get_running_loop().create_future()
                self.metrics.cache.labels("miss").inc()
                return None, key
            if leader is None or remaining <= 0:
                self.metrics.cache.labels("unstable" if state == "unstable" else "miss").inc()
                return None, None
            if not joined:
                joined = True
                self.metrics.cache.labels("joined").inc()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(leader), remaining)

    async def confirm_soon(self, request: RunRequest, group: str) -> None:
        """``request`` is about to be shared (a snippet was stored) by client ``group``:
        if its answer is a candidate, ask for its pristine run now, so the link's
        readers find it confirmed. The ask is the sharer's (its cap and budget of
        pristine time: a client sharing many snippets pays for them and is refused
        past its share, backend/app/trust/pristine_lines.py)."""
        if self.confirmer is None or not self.confirmer.enabled:
            return
        try:
            request = self.prepare(request)
        except ApiError:
            return
        key = self.cache.key_for(request)
        pending = self._leaders.get(key) if key is not None else None
        if pending is not None:  # its run, or its evidence being written (record_later)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(pending), self.settings.cache_join_wait_s)
        state, _ = await self.cache.lookup(request)
        if key is not None and state in ("candidate", "own"):
            self.confirmer.ask(request, key, group)

    def resolve(self, key: str | None) -> None:
        """The run that others with the same key wait for has ended."""
        future = self._leaders.pop(key, None) if key is not None else None
        if future is not None and not future.done():
            future.set_result(None)

    async def _admit(
        self,
        request: RunRequest,
        caller: Caller,
        hit: Hit | None,
    ) -> RunStream:
        ticket = self.admission.enter(caller, request.backend)
        if not caller.keeps_process:  # its process serves this run alone (issue 33)
            ticket.pool_tenant = single_use(caller.tenant)
        pooled = request if hit is None else follow_up_request(request)
        try:
            handle = await self.admission.submit(self.pool, pooled, ticket)
        except ApiError:
            self.admission.release(ticket)
            raise
        except Exception as exc:
            self.admission.release(ticket)
            log_internal("pool.submit", exc)
            raise ApiError(
                503,
                "pool_unavailable",
                f"the worker pool failed: {type(exc).__name__}",
                retry_after_s=5.0,
            )
        except BaseException:
            self.admission.release(ticket)
            raise
        return RunStream(self, request, caller, handle, ticket, hit)
