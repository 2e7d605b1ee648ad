"""The budget's choice of the zygote that gives way, over the pools of several JAX
versions (sandbox/pool/budget.py); fast: stand-ins for the pools and zygotes, the
budget's own code. tests/pool/test_versions_budget.py does it with real jails."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sandbox.pool.budget import Budget


def pool(own_victim: str | None = None) -> Any:
    p = SimpleNamespace(zygotes=[], changed=lambda: None)
    p._victim = lambda tenant: next((z for z in p.zygotes if z.tenant == own_victim), None)
    return p


def zygote(p: Any, tenant: str | None, used: float, state: str = "idle") -> Any:
    z = SimpleNamespace(pool=p, tenant=tenant, last_used=used, state=state, run=None)
    p.zygotes.append(z)
    return z


def budget(*pools: Any, zygotes: int) -> Budget:
    b = Budget(places=2, zygotes=zygotes)
    for p in pools:
        b.join(p)
    return b


def test_a_version_under_its_share_takes_an_idle_spare_of_one_over_it_first() -> None:
    old, new = pool(), pool()
    a = zygote(old, "addr:a", used=1)
    spare = zygote(old, None, used=5)
    zygote(old, "addr:b", used=2)
    zygote(old, "addr:c", used=3)
    b = budget(old, new, zygotes=4)
    assert b.held() == 4 and not b.has_room()
    assert b.victim(new, "addr:x") is spare  # a spare before any tenant's
    old.zygotes.remove(spare)
    zygote(new, "addr:y", used=9)
    assert b.victim(new, "addr:x") is a  # then the least recently used


def test_a_version_at_its_share_gives_up_its_own_never_one_of_a_version_at_its_share() -> None:
    old, new = pool(), pool(own_victim="addr:n1")
    zygote(old, "addr:o1", used=0)
    zygote(old, "addr:o2", used=0)
    n1 = zygote(new, "addr:n1", used=10)
    zygote(new, "addr:n2", used=11)
    b = budget(old, new, zygotes=4)
    assert b.victim(new, "addr:x") is n1
    new._victim = lambda tenant: None  # its own are all busy: it waits, old keeps its share
    assert b.victim(new, "addr:x") is None


def test_a_version_at_its_share_takes_from_one_over_it_when_its_own_are_busy() -> None:
    old, new = pool(), pool()
    zygote(new, "addr:n1", used=0, state="busy")
    zygote(new, "addr:n2", used=0, state="busy")
    o1 = zygote(old, "addr:o1", used=3)
    zygote(old, "addr:o2", used=4)
    zygote(old, "addr:o3", used=5)
    b = budget(old, new, zygotes=5)  # share: 2 each; old holds 3
    assert b.victim(new, "addr:x") is o1


def test_with_nothing_idle_there_is_no_victim() -> None:
    old, new = pool(), pool()
    zygote(old, "addr:o1", used=0, state="busy")
    zygote(old, "addr:o2", used=0, state="starting")
    b = budget(old, new, zygotes=2)
    assert b.victim(new, "addr:x") is None


def test_places_and_zygotes_count_every_pool() -> None:
    old, new = pool(), pool()
    z = zygote(old, "addr:a", used=0)
    zygote(new, "addr:b", used=0)
    z.run = object()
    b = budget(old, new, zygotes=3)
    assert b.held() == 2 and b.has_room() and b.running() == [z]
    b.leave(new)
    assert b.held() == 1 and b.describe()["pools"] == 1
