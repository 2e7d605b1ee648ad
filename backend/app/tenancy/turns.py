"""Turns on the pool's warm processes (``TenantTurns``): which tenants hold one and
which wait, in a line fair by client group (``group_of``). Admission (admission.py)
asks it before a run of a tenant that holds no process goes to a pool that keeps one
per tenant."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

#: Places in line for the pool, all client groups together; more are refused without one.
MAX_WAITING_TENANTS = 10_000


def group_of(tenant: str) -> str:
    """The client group of a tenant (``GROUP|NAME``, backend/app/tenancy/identity.py): its
    address (IPv6: its /56), or its API token."""
    return tenant.partition("|")[0]


@dataclass
class _Hold:
    since: float  # when the tenant got its place
    last: float  # its last run's admission or end


@dataclass
class _Wait:
    until: float  # when it loses its place if it has not asked again
    gone: asyncio.Event | None  # set once the connection it last asked on closed


class TenantTurns:
    """Which tenants hold one of the pool's warm processes (at most ``slots``; a zygote
    each, sandbox/pool/zygote_pool.py), and which wait for one.

    A new tenant gets a place while fewer than ``slots`` are held; otherwise it is told
    to come back when one is expected to free (a 503), and keeps its place in line if
    it does. A holder keeps its place while it is using it: it loses it after
    ``idle_s`` without a run, or, when more wait than places are free, on its first
    run after ``turn_s`` holding it if it is among the longest holders, one for each
    such waiting tenant (then it queues again at the back). So a full pool serves the
    tenants it holds at warm speed instead of starting a new jail for every run.

    The line is fair by client group (``group_of``: an address, or a token), not by
    tenant, so that opening many page sessions buys no more turns: a group holds at
    most ``per_group`` places in line (its other tenants are told to come back, with
    no place), and the groups are served round robin: the first waiting tenant of
    each group in turn, a group that was served going to the back. A place is kept
    only while its tenant asks again within its ``Retry-After`` and a short grace,
    and is given up at once when the connection it asked on closes (``CLIENT_GONE``).
    A new group therefore waits behind at most one tenant of each other group per
    round: with G groups waiting, its first run comes within about
    ``ceil(G / slots) + 1`` turns, however many sessions those groups open."""

    def __init__(self, turn_s: float, idle_s: float, per_group: int = 2) -> None:
        self.turn_s = turn_s
        self.idle_s = idle_s
        self.per_group = per_group
        self._holders: dict[str, _Hold] = {}
        #: group -> its waiting tenants; the groups in the order they take turns
        self._line: OrderedDict[str, OrderedDict[str, _Wait]] = OrderedDict()
        self._waiting = 0

    @property
    def holders(self) -> int:
        return len(self._holders)

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def groups_waiting(self) -> int:
        return len(self._line)

    def ended(self, tenant: str, now: float) -> None:
        """A run of ``tenant`` ended: its idle time counts from now."""
        hold = self._holders.get(tenant)
        if hold is not None:
            hold.last = now

    def claim(
        self,
        tenant: str,
        slots: int,
        busy: Callable[[str], bool],
        now: float,
        gone: asyncio.Event | None = None,
    ) -> tuple[float, bool]:
        """(0, _) when ``tenant`` may run now; else (seconds until it may ask again,
        whether it lost its place because its turn was over). ``gone``: the event of
        the connection it asks on (``CLIENT_GONE``)."""
        self._expire(busy, now)
        hold = self._holders.get(tenant)
        turn_over = False
        if hold is not None:
            if not self._turn_is_over(tenant, hold, slots, now):
                hold.last = now
                return 0.0, False
            del self._holders[tenant]  # its turn is over; it queues behind the others
            turn_over = True
        free = slots - len(self._holders)
        group = group_of(tenant)
        waiters = self._line.get(group)
        queued = waiters is not None and tenant in waiters
        room = waiters is None or len(waiters) < self.per_group
        if not queued and room and self._waiting < MAX_WAITING_TENANTS:
            waiters = self._line.setdefault(group, OrderedDict())
            waiters[tenant] = _Wait(now, gone)
            self._waiting += 1
            queued = True
        place = self._place(group, tenant) if queued else self._waiting
        if queued and place < free:
            self._leave(group, tenant)
            if group in self._line:
                self._line.move_to_end(group)  # its next tenant waits for the others' turns
            self._holders[tenant] = _Hold(now, now)
            return 0.0, False
        retry = max(1.0, self._expected_free(max(place - free, 0), now) - now)
        if queued:
            assert waiters is not None
            # it keeps its place if it comes back within its Retry-After and a grace
            waiters[tenant] = _Wait(now + retry + max(self.idle_s, 5.0), gone)
        return retry, turn_over

    def _turn_is_over(self, tenant: str, hold: _Hold, slots: int, now: float) -> bool:
        """Whether a holder past ``turn_s`` gives its place up now: only while more
        tenants wait than places are free, and only the longest holders, one for each
        such waiting tenant. Every holder past its turn giving way would retire a
        process per holder and turn (a new jail each: with 75 holders and 5 waiting,
        five a second, the whole of two CPUs) to seat the few who wait."""
        if now - hold.since < self.turn_s:
            return False
        excess = self._waiting - (slots - len(self._holders))
        if excess <= 0:
            return False
        longer = sum(
            1
            for name, other in self._holders.items()
            if name != tenant and other.since < hold.since
        )
        return longer < excess

    def _place(self, group: str, tenant: str) -> int:
        """How many waiting tenants are served before ``tenant``: round robin over the
        groups in line, the first waiting tenant of each, then the second, ..."""
        rank = list(self._line[group]).index(tenant)
        place = 0
        ahead = True  # the groups before ``group`` in line
        for name, waiters in self._line.items():
            if name == group:
                ahead = False
            place += min(len(waiters), rank) + (1 if ahead and len(waiters) > rank else 0)
        return place

    def _leave(self, group: str, tenant: str) -> None:
        waiters = self._line[group]
        del waiters[tenant]
        self._waiting -= 1
        if not waiters:
            del self._line[group]

    def _expected_free(self, behind: int, now: float) -> float:
        """When the place of the ``behind``-th waiting tenant beyond the free places
        is expected: the holders' turns end in order, then every ``turn_s``."""
        ends = sorted(
            min(h.since + self.turn_s, h.last + self.idle_s) for h in self._holders.values()
        ) or [now]
        rounds, index = divmod(behind, len(ends))
        return ends[index] + rounds * self.turn_s

    def _expire(self, busy: Callable[[str], bool], now: float) -> None:
        for tenant, hold in list(self._holders.items()):
            if not busy(tenant) and now - hold.last >= self.idle_s:
                del self._holders[tenant]
        for group, waiters in list(self._line.items()):
            for tenant, wait in list(waiters.items()):
                if now > wait.until or (wait.gone is not None and wait.gone.is_set()):
                    self._leave(group, tenant)
