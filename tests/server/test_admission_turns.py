"""A full pool of warm processes sheds new tenants (503 + Retry-After) instead of
evicting busy tenants' processes, and takes waiting tenants by turns
(backend/app/tenancy/admission.py, TenantTurns)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from backend.app.core.errors import Overloaded
from backend.app.core.metrics import Metrics
from backend.app.tenancy import rates
from backend.app.tenancy import turns as turns_module
from backend.app.tenancy.admission import Admission
from backend.app.tenancy.caller import Caller
from backend.app.tenancy.turns import TenantTurns

from .conftest import make_settings


def never_busy(_: str) -> bool:
    return False


def test_a_new_tenant_is_refused_while_every_place_is_used() -> None:
    turns = TenantTurns(turn_s=30.0, idle_s=10.0)
    assert turns.claim("a", 2, never_busy, 0.0) == (0.0, False)
    assert turns.claim("b", 2, never_busy, 0.0) == (0.0, False)
    wait, turn_over = turns.claim("c", 2, never_busy, 1.0)
    # the earliest place to free: a or b idle from t=0 for 10 s
    assert (wait, turn_over) == (9.0, False)
    assert turns.claim("a", 2, never_busy, 2.0) == (0.0, False)  # holders keep going


def test_an_idle_holder_gives_its_place_to_the_first_waiting_tenant() -> None:
    turns = TenantTurns(turn_s=30.0, idle_s=10.0)
    turns.claim("a", 1, never_busy, 0.0)
    assert turns.claim("b", 1, never_busy, 1.0)[0] > 0
    assert turns.claim("c", 1, never_busy, 2.0)[0] > 0
    # a has had no run for 10 s; c asks first, but b was waiting before it
    assert turns.claim("c", 1, never_busy, 11.0)[0] > 0
    assert turns.claim("b", 1, never_busy, 11.5) == (0.0, False)


def test_a_busy_holder_is_never_idle() -> None:
    turns = TenantTurns(turn_s=30.0, idle_s=1.0)
    turns.claim("a", 1, never_busy, 0.0)
    assert turns.claim("b", 1, lambda t: t == "a", 5.0)[0] > 0


def test_a_holder_s_turn_ends_only_while_others_wait() -> None:
    turns = TenantTurns(turn_s=30.0, idle_s=10.0)
    for second in range(0, 100, 5):  # nobody waits: a keeps its place past its turn
        assert turns.claim("a", 1, never_busy, float(second)) == (0.0, False)
    turns = TenantTurns(turn_s=30.0, idle_s=10.0)
    turns.claim("a", 1, never_busy, 0.0)
    assert turns.claim("b", 1, never_busy, 1.0) == (9.0, False)  # a may be idle at 10 s
    for t in [9.0, 18.0, 27.0]:  # a is not; b keeps asking
        assert turns.claim("a", 1, never_busy, t) == (0.0, False)
        assert turns.claim("b", 1, never_busy, t + 1) == (min(9.0, 29.0 - t), False)
    wait_a, turn_over = turns.claim("a", 1, never_busy, 30.0)
    assert turn_over and wait_a >= 1.0  # a's turn is over: it queues behind b
    assert turns.claim("a", 1, never_busy, 30.5)[0] > 0  # the place is kept for b
    assert turns.claim("b", 1, never_busy, 31.0) == (0.0, False)
    assert turns.claim("a", 1, never_busy, 31.0)[0] > 0


def test_only_the_longest_holders_give_way_one_for_each_waiting_tenant() -> None:
    # four holders seated at t=0..3, one tenant waiting: once every turn is over, only
    # the longest holder gives its place up; the others keep theirs (each change of
    # hands retires a process and starts a jail)
    turns = TenantTurns(turn_s=30.0, idle_s=100.0)
    for i, name in enumerate("abcd"):
        assert turns.claim(name, 4, never_busy, float(i)) == (0.0, False)
    assert turns.claim("w", 4, never_busy, 4.0)[0] > 0  # waits
    for name in "dcb":  # past their turns, but not the longest holder
        assert turns.claim(name, 4, never_busy, 40.0) == (0.0, False)
    wait, turn_over = turns.claim("a", 4, never_busy, 40.0)
    assert turn_over and wait > 0  # the longest holder's turn is over
    assert turns.claim("w", 4, never_busy, 41.0) == (0.0, False)  # w takes its place
    # a waits now: b, the longest holder left, gives way to it, not d
    assert turns.claim("d", 4, never_busy, 42.0) == (0.0, False)
    assert turns.claim("b", 4, never_busy, 42.0)[1] is True


def test_waiting_tenants_are_served_in_order_within_their_turns() -> None:
    """64 tenants running back to back against 8 places: every one of them runs within
    ceil(64 / 8) turns, and no more than 8 hold a place at any time."""
    turns = TenantTurns(turn_s=10.0, idle_s=5.0)
    due = dict.fromkeys(range(64), 0.0)
    first_run: dict[int, float] = {}
    now = 0.0
    while now < 100.0:
        for tenant, at in due.items():
            if at <= now:
                wait, _ = turns.claim(str(tenant), 8, never_busy, now)
                if wait == 0:
                    first_run.setdefault(tenant, now)
                    due[tenant] = now + 0.1  # its next run, back to back
                else:
                    due[tenant] = now + wait  # honours Retry-After
        assert turns.holders <= 8
        now = round(now + 0.1, 1)
    assert len(first_run) == 64
    assert max(first_run.values()) <= 8 * 10.0 + 1.0


def test_a_tenant_that_does_not_come_back_loses_its_place() -> None:
    turns = TenantTurns(turn_s=30.0, idle_s=10.0)
    turns.claim("a", 1, never_busy, 0.0)
    wait, _ = turns.claim("b", 1, never_busy, 1.0)
    assert turns.waiting == 1
    turns.claim("a", 1, never_busy, 1.0 + wait + 10.5)  # b is long gone
    assert turns.waiting == 0


class SlotPool:
    """A pool with a warm process per tenant and ``tenant_slots`` of them; it records
    the tenants whose turn it was told is over."""

    def __init__(self, slots: int) -> None:
        self.tenant_slots = slots
        self.ended: list[str] = []

    def end_turn(self, tenant: str) -> None:
        self.ended.append(tenant)

    async def submit(self, request: Any, tenant: str) -> Any:
        return SimpleNamespace(run_id=tenant)


async def one_run(admission: Admission, pool: SlotPool, tenant: str) -> None:
    """A run of ``tenant`` admitted, submitted and released (its ticket in any case)."""
    ticket = admission.enter(Caller(tenant=tenant, rate_key=tenant, client=tenant), "cpu")
    try:
        await admission.submit(pool, None, ticket)  # type: ignore[arg-type]
    finally:
        admission.release(ticket)


def test_admission_refuses_a_new_tenant_with_503_and_counts_it(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, tenant_turn_s=30.0, tenant_idle_s=10.0)
    metrics = Metrics()
    admission = Admission(settings, metrics)
    pool = SlotPool(2)

    asyncio.run(one_run(admission, pool, "a"))
    asyncio.run(one_run(admission, pool, "b"))
    with pytest.raises(Overloaded) as refused:
        asyncio.run(one_run(admission, pool, "c"))
    assert refused.value.status == 503
    assert (refused.value.retry_after_s or 0.0) >= 1.0
    assert "waiting" in str(refused.value.message)
    assert metrics.rejected.labels("tenants")._value.get() == 1
    asyncio.run(one_run(admission, pool, "a"))  # a holder is not refused
    assert pool.ended == []


def test_admission_ends_a_turn_through_the_pool(tmp_path: Path) -> None:
    # a turn long enough that b's first try falls inside a's on a loaded machine
    settings = make_settings(tmp_path, tenant_turn_s=2.0, tenant_idle_s=30.0)
    metrics = Metrics()
    admission = Admission(settings, metrics)
    pool = SlotPool(1)

    asyncio.run(one_run(admission, pool, "a"))
    with pytest.raises(Overloaded):
        asyncio.run(one_run(admission, pool, "b"))
    time.sleep(2.1)  # a's turn is over (waiting longer only makes that surer)
    with pytest.raises(Overloaded) as refused:
        asyncio.run(one_run(admission, pool, "a"))
    assert refused.value.status == 503
    assert pool.ended == ["a"]
    assert metrics.rejected.labels("turn")._value.get() == 1
    asyncio.run(one_run(admission, pool, "b"))  # b's turn now


def test_a_pool_without_places_per_tenant_is_not_limited(tmp_path: Path) -> None:
    admission = Admission(make_settings(tmp_path), Metrics())
    pool = SlotPool(1)
    del pool.tenant_slots  # remote workers, the fake pool

    for tenant in "abcdef":
        asyncio.run(one_run(admission, pool, tenant))


def test_the_line_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns_module, "MAX_WAITING_TENANTS", 3)
    turns = TenantTurns(turn_s=30.0, idle_s=10.0)
    turns.claim("holder", 1, never_busy, 0.0)
    for n in range(10):
        assert turns.claim(f"new-{n}", 1, never_busy, 1.0)[0] >= 1.0
    assert turns.waiting == 3


# --- the line is fair by client group (issue 20, item 5) ------------------------------


def test_one_group_holds_at_most_a_few_places_in_line() -> None:
    turns = TenantTurns(turn_s=30.0, idle_s=10.0, per_group=2)
    turns.claim("holder", 1, never_busy, 0.0)
    for n in range(50):  # one address, many page sessions
        assert turns.claim(f"addr:a|session:{n}", 1, never_busy, 1.0)[0] >= 1.0
    assert (turns.waiting, turns.groups_waiting) == (2, 1)


def test_groups_are_served_round_robin_whatever_their_sessions() -> None:
    """Three addresses with two places in line each, then a new address: it is served
    fourth (after one tenant of each group before it), not seventh."""
    turns = TenantTurns(turn_s=30.0, idle_s=10.0, per_group=2)
    turns.claim("holder", 1, never_busy, 0.0)
    for n in range(2):
        for group in "abc":
            turns.claim(f"addr:{group}|session:{n}", 1, never_busy, 1.0)
    turns.claim("addr:new|session:0", 1, never_busy, 2.0)
    served = []
    now = 20.0  # the holder is idle: one place frees at a time, every one is used
    while turns.waiting:
        waiting = [f"addr:{g}|session:{n}" for n in range(2) for g in ["a", "b", "c", "new"]]
        for tenant in waiting:  # everyone asks again, in an order that favours nobody
            if tenant not in served and turns.claim(tenant, 1, never_busy, now)[0] == 0:
                served.append(tenant)
                now += 11.0  # its place goes idle
                break
    assert served.index("addr:new|session:0") == 3
    assert served[:3] == ["addr:a|session:0", "addr:b|session:0", "addr:c|session:0"]


def test_a_place_is_given_up_when_its_connection_closes() -> None:
    turns = TenantTurns(turn_s=30.0, idle_s=10.0, per_group=2)
    turns.claim("holder", 1, never_busy, 0.0)
    socket = asyncio.Event()
    turns.claim("addr:a|session:0", 1, never_busy, 1.0, socket)
    turns.claim("addr:b|session:0", 1, never_busy, 1.0)
    assert turns.waiting == 2
    socket.set()  # the WebSocket it asked on closed
    turns.claim("addr:c|session:0", 1, never_busy, 1.5)
    assert turns.waiting == 2 and turns.groups_waiting == 2  # b and c; a is gone
    # the holder goes idle: b, once first behind a, is served first
    assert turns.claim("addr:b|session:0", 1, never_busy, 11.0) == (0.0, False)


# --- the rate limiter's memory (issue 20, item 10) ------------------------------------


def test_the_rate_limiter_stays_bounded_under_many_keys() -> None:
    now = [0.0]
    limiter = rates.RateLimiter(60.0, 2, max_keys=1000, clock=lambda: now[0])
    for n in range(50_000):  # distinct keys, faster than their buckets refill
        limiter.take(f"addr:{n}")
        now[0] += 0.0001
    assert len(limiter) == 1000
    assert limiter.take("addr:49999") == 0.0  # the newest are kept
    assert limiter.take("addr:49999") > 0  # and still counted
    # Once their buckets are full again (2 s here), old keys are forgotten as calls go by.
    now[0] += 5.0
    for n in range(600):
        limiter.take(f"late:{n % 3}")
    assert len(limiter) == 3


def test_forgetting_a_full_bucket_loses_nothing() -> None:
    now = [0.0]
    limiter = rates.RateLimiter(60.0, 2, clock=lambda: now[0])
    assert limiter.take("a") == 0 and limiter.take("a") == 0
    assert limiter.take("a") > 0  # its burst is spent
    now[0] += 1.0
    limiter.take("b")
    assert len(limiter) == 2  # a is not full yet: kept
    assert limiter.take("a") == 0  # one token back after 1 s
    assert limiter.take("a") > 0
