"""Admission control: who may start a run now, who waits, who is told to come back.

Three checks, in order, each answered with ``Retry-After``:
1. a token bucket per rate key (rates.py) (client address, or a known API token) -> 429;
2. runs in flight per tenant, and per client address -> 429;
3. the pool: a run it cannot take now waits in a bounded queue per backend, at most
   ``queue_timeout_s``; a full queue, or a wait that runs out -> 503. The queue is
   fair across clients: they take turns (round robin), so one client's many runs
   do not keep another's waiting behind them (``FairQueue``).
   Before that, where the pool keeps a warm process per tenant (``tenant_slots``): a
   tenant that holds none while every one belongs to a tenant using it is told 503 at
   once (``TenantTurns``, turns.py) instead of evicting a busy tenant's process; the line for
   those places is fair by client group (address or token), a few places per group.
   A place in either line is given up at once when its client goes away
   (``CLIENT_GONE``).
Also here: the cap on a client address's open WebSockets.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, OrderedDict, deque
from contextvars import ContextVar
from dataclasses import dataclass, field

from backend.app.core.errors import Overloaded
from backend.app.core.metrics import Metrics
from backend.app.core.settings import Settings
from backend.app.tenancy.caller import Caller
from backend.app.tenancy.rates import RateLimiter
from backend.app.tenancy.turns import TenantTurns
from sandbox.pool.base import Pool, PoolFull, RunHandle, SignalsFree, TakesTurns
from sandbox.protocol import RunRequest

#: Lookups of unknown snippets a client may make at once (then ``not_found_rate_per_minute``).
NOT_FOUND_BURST = 20


@dataclass
class Ticket:
    """A tenant's place among the runs in flight; ``release`` it exactly once."""

    tenant: str
    client: str
    backend: str
    waited_s: float = 0.0
    released: bool = field(default=False)
    #: the tenant the pool is given, when not ``tenant``: a single-use one
    #: (sandbox/protocol/tenants.py) for a run that must shape no kept process
    pool_tenant: str = ""


class FairQueue:
    """Waiters of one backend, served by turns across clients: the head is the oldest
    waiter of the client whose turn it is; a client that was served goes to the back."""

    def __init__(self) -> None:
        self._turns: OrderedDict[str, deque[asyncio.Event]] = OrderedDict()
        self._owner: dict[asyncio.Event, str] = {}

    def __len__(self) -> int:
        return len(self._owner)

    def __bool__(self) -> bool:
        return bool(self._owner)

    def add(self, client: str, waiter: asyncio.Event) -> None:
        self._turns.setdefault(client, deque()).append(waiter)
        self._owner[waiter] = client

    def head(self) -> asyncio.Event | None:
        for waiters in self._turns.values():
            return waiters[0]
        return None

    def remove(self, waiter: asyncio.Event, *, served: bool) -> None:
        client = self._owner.pop(waiter)
        waiters = self._turns[client]
        waiters.remove(waiter)
        if not waiters:
            del self._turns[client]
        elif served:
            self._turns.move_to_end(client)  # its next run waits for the others' turns


#: Where a request came from says, as an event set once its client went away: a
#: WebSocket that closed, an HTTP request whose client disconnected before its answer
#: (set by routes/ws.py and middleware.ClientPresence). A place in line (or in the
#: queue) held for a client that is gone is given up at once.
CLIENT_GONE: ContextVar[asyncio.Event | None] = ContextVar("jaxplay_client_gone", default=None)


class Admission:
    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self._s = settings
        self._metrics = metrics
        self._rate = RateLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst)
        self._snippets = RateLimiter(settings.snippet_rate_per_minute, settings.snippet_rate_burst)
        self._misses = RateLimiter(settings.not_found_rate_per_minute, NOT_FOUND_BURST)
        self._sessions = RateLimiter(
            settings.session_issue_per_hour / 60.0, settings.session_issue_burst
        )
        self._tenant_runs: Counter[str] = Counter()
        self._client_runs: Counter[str] = Counter()
        self._sockets: Counter[str] = Counter()
        self._waiters: dict[str, FairQueue] = {}
        self._listened: set[int] = set()  # pools that say when a run's place frees
        self._in_flight = 0
        self.turns = TenantTurns(
            settings.tenant_turn_s, settings.tenant_idle_s, settings.max_waiting_per_client
        )

    # --- what /api/v1/backends shows -------------------------------------------------
    def queue_length(self, backend: str | None = None) -> int:
        if backend is not None:
            return len(self._waiters.get(backend, ()))
        return sum(len(q) for q in self._waiters.values())

    @property
    def in_flight(self) -> int:
        return self._in_flight

    # --- the checks ------------------------------------------------------------------
    def _refuse(
        self, reason: str, status: int, error: str, message: str, retry_after_s: float
    ) -> Overloaded:
        """Counts a refusal under its reason (one of the metric's fixed set) and gives
        the error to raise."""
        self._metrics.rejected.labels(reason).inc()
        return Overloaded(status, error, message, retry_after_s)

    def check_rate(self, rate_key: str) -> None:
        wait = self._rate.take(rate_key)
        if wait > 0:
            raise self._refuse(
                "rate",
                429,
                "rate_limited",
                f"too many runs: at most {self._s.rate_limit_per_minute:g} a minute "
                f"(bursts of {self._s.rate_limit_burst}); try again in {wait:.1f} s",
                wait,
            )

    def check_snippet_rate(self, client: str) -> None:
        wait = self._snippets.take(client)
        if wait > 0:
            raise self._refuse(
                "snippets",
                429,
                "rate_limited",
                f"too many snippets: at most {self._s.snippet_rate_per_minute:g} a minute "
                f"(bursts of {self._s.snippet_rate_burst}); try again in {wait:.1f} s",
                wait,
            )

    def check_session_issue(self, client: str) -> None:
        """Before an API session is issued (``POST /api/v1/sessions``): a few per
        address, then a few an hour, so one address cannot mint tenants without end."""
        wait = self._sessions.take(client)
        if wait > 0:
            raise self._refuse(
                "sessions",
                429,
                "too_many_sessions",
                f"this address was issued {self._s.session_issue_burst} sessions lately "
                f"(then {self._s.session_issue_per_hour:g} an hour); keep using one of them, "
                f"or try again in {wait:.0f} s",
                wait,
            )

    def check_lookups(self, client: str) -> None:
        """Before a snippet lookup: a client that missed too often waits, whatever it
        asks for now (so a hit cannot be told from a miss by the answer's status)."""
        wait = self._misses.peek(client)
        if wait > 0:
            raise self._refuse(
                "not_found",
                429,
                "rate_limited",
                f"too many lookups of snippets that do not exist (at most "
                f"{self._s.not_found_rate_per_minute:g} a minute); try again in {wait:.1f} s",
                wait,
            )

    def note_miss(self, client: str) -> None:
        self._misses.take(client)

    def enter(self, caller: Caller, backend: str) -> Ticket:
        limit = self._s.max_runs_per_tenant if caller.max_runs is None else caller.max_runs
        tenant, client = caller.tenant, caller.client
        if self._tenant_runs[tenant] >= limit:
            raise self._refuse(
                "tenant",
                429,
                "too_many_runs",
                f"this client already has {self._tenant_runs[tenant]} runs in progress (at most {limit})",
                1.0,
            )
        per_client = self._s.max_runs_per_client
        if client and self._client_runs[client] >= per_client:
            raise self._refuse(
                "tenant",
                429,
                "too_many_runs",
                f"this address already has {self._client_runs[client]} runs in progress "
                f"(at most {per_client}, all its sessions and connections together)",
                1.0,
            )
        self._tenant_runs[tenant] += 1
        if client:
            self._client_runs[client] += 1
        self._in_flight += 1
        self._metrics.in_flight.set(self._in_flight)
        return Ticket(tenant, client, backend)

    def release(self, ticket: Ticket) -> None:
        if ticket.released:
            return
        ticket.released = True
        self._tenant_runs[ticket.tenant] -= 1
        if self._tenant_runs[ticket.tenant] <= 0:
            del self._tenant_runs[ticket.tenant]
        if ticket.client:
            self._client_runs[ticket.client] -= 1
            if self._client_runs[ticket.client] <= 0:
                del self._client_runs[ticket.client]
        self._in_flight -= 1
        self._metrics.in_flight.set(self._in_flight)
        self.turns.ended(ticket.tenant, time.monotonic())
        self._wake(ticket.backend)

    def _listen(self, pool: Pool) -> None:
        """Where the pool says when a run's place frees (``on_free``), the head of
        every queue tries again then, instead of when a run's ticket is released
        (after its events were relayed)."""
        if id(pool) in self._listened:
            return
        if isinstance(pool, SignalsFree):
            pool.on_free(self._place_freed)
        self._listened.add(id(pool))

    def _place_freed(self) -> None:
        for queue in self._waiters.values():
            head = queue.head()
            if head is not None:
                head.set()

    def _wake(self, backend: str) -> None:
        # A run ended: the longest waiter tries the pool again (any backend's, when
        # backends share a pool: capacity freed for one is capacity for all).
        for name in [backend, *self._waiters]:
            head = self._waiters[name].head() if name in self._waiters else None
            if head is not None:
                head.set()
                return

    # --- WebSockets per client address -------------------------------------------------
    def open_socket(self, client: str) -> bool:
        """Count a new WebSocket of ``client``; False (not counted) when it has its
        ``max_websockets_per_client`` already."""
        if client and self._sockets[client] >= self._s.max_websockets_per_client:
            self._metrics.rejected.labels("sockets").inc()
            return False
        self._sockets[client] += 1
        return True

    def close_socket(self, client: str) -> None:
        self._sockets[client] -= 1
        if self._sockets[client] <= 0:
            del self._sockets[client]

    def _take_turn(self, pool: Pool, tenant: str) -> None:
        """Refuse (503) a tenant that holds none of the pool's warm processes while
        every one belongs to a tenant using it (``TenantTurns``): serving it would evict
        a busy tenant's process and start a new jail for nearly every run."""
        if not isinstance(pool, TakesTurns) or pool.tenant_slots <= 0:
            return  # a pool without a process per tenant (remote workers, a fake)
        slots = pool.tenant_slots
        wait, turn_over = self.turns.claim(
            tenant,
            slots,
            lambda t: self._tenant_runs.get(t, 0) > 0,
            time.monotonic(),
            CLIENT_GONE.get(),
        )
        if wait <= 0:
            return
        if turn_over:
            pool.end_turn(tenant)  # its process makes room for the next tenant's now
            raise self._refuse(
                "turn",
                503,
                "server_busy",
                f"other clients are waiting for a worker and this one had its turn "
                f"({self.turns.turn_s:g} s); try again in {wait:.0f} s",
                wait,
            )
        raise self._refuse(
            "tenants",
            503,
            "server_busy",
            f"every worker is held by one of {self.turns.holders} clients running code now "
            f"({self.turns.waiting} waiting, from {self.turns.groups_waiting} addresses or "
            f"tokens, served in turn); try again in {wait:.0f} s",
            wait,
        )

    async def submit(self, pool: Pool, request: RunRequest, ticket: Ticket) -> RunHandle:
        """The pool's handle for the run, after waiting in the queue if need be."""
        backend = ticket.backend
        self._take_turn(pool, ticket.tenant)
        self._listen(pool)
        queue = self._waiters.setdefault(backend, FairQueue())
        retry = 1.0
        if not queue:
            try:
                return await pool.submit(request, ticket.pool_tenant or ticket.tenant)
            except PoolFull as exc:
                retry = exc.retry_after_s
        if len(queue) >= self._s.max_queue:
            raise self._refuse(
                "queue_full",
                503,
                "server_busy",
                f"every worker is busy and {len(queue)} runs are waiting for {backend}; try again later",
                max(retry, 1.0),
            )
        started = time.monotonic()
        served = False
        deadline = started + self._s.queue_timeout_s
        gone = CLIENT_GONE.get()
        me = asyncio.Event()
        queue.add(ticket.client or ticket.tenant, me)
        self._metrics.queue.labels(backend).set(len(queue))
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._refuse(
                        "queue_timeout",
                        503,
                        "server_busy",
                        f"no worker became free within {self._s.queue_timeout_s:g} s; try again later",
                        max(retry, 1.0),
                    )
                # The head of the queue retries when a run ends or after the pool's
                # own hint; the others wait their turn.
                head = queue.head() is me
                timeout = min(remaining, max(retry, 0.05)) if head else remaining
                await _either(me, gone, timeout)
                if gone is not None and gone.is_set():
                    # nobody reads the answer; its place goes to the next in line now
                    raise self._refuse(
                        "gone", 503, "server_busy", "the client went away while it waited", 1.0
                    )
                me.clear()
                if queue.head() is not me:
                    continue
                try:
                    handle = await pool.submit(request, ticket.pool_tenant or ticket.tenant)
                except PoolFull as exc:
                    retry = exc.retry_after_s
                    continue
                ticket.waited_s = time.monotonic() - started
                self._metrics.queue_wait.observe(ticket.waited_s)
                served = True
                return handle
        finally:
            was_head = queue.head() is me
            queue.remove(me, served=served)
            self._metrics.queue.labels(backend).set(len(queue))
            nxt = queue.head()
            if was_head and nxt is not None:
                nxt.set()  # the next in line may find a free worker too


async def _either(event: asyncio.Event, other: asyncio.Event | None, timeout: float) -> None:
    """Until ``event`` or ``other`` is set, or ``timeout`` passed."""
    waits = [asyncio.ensure_future(event.wait())]
    if other is not None:
        waits.append(asyncio.ensure_future(other.wait()))
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
