"""One machine's places and zygotes, shared by every warm pool on it.

A server runs one warm pool per JAX version (sandbox/pool/versioned.py), all on the
same CPUs, memory and jail uids. Each pool would size itself from the whole machine
(sandbox/pool/settings.py ``sizes``), so two versions would run twice the machine's
places and hold twice the zygotes its memory and uids allow. Instead the first pool
(the default version's) makes a ``Budget`` from its sizes and every other version's
pool takes from it:

- **places**: runs at once, over every version; one more is PoolFull (HTTP 429);
- **zygotes**: jails alive at once (each holds ~256 MiB of memory with JAX imported,
  and a jail uid), over every version.

A pool that needs a zygote while the budget is full gives one up: its own (fair
between client groups, ``ZygotePool._victim``) once it holds its share of the
budget (the zygotes over the pools holding any), else an idle one of another version
over its share — a spare first, then the least recently used (a pool under its share
takes any other version's idle zygote, its own last). With none it answers PoolFull. The budget keeps no counts of its own: it reads the pools'
(which zygotes exist, which run), so it cannot drift from them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sandbox.zygote.handle import Zygote


class Member(Protocol):
    """What the budget reads of a pool that joined it (sandbox/pool/zygote_pool.py)."""

    zygotes: list[Zygote]

    def _victim(self, tenant: str) -> Zygote | None: ...

    def changed(self) -> None: ...

    def notify_free(self) -> None: ...


class Budget:
    """``places`` runs and ``zygotes`` jails at once, over the pools that joined."""

    def __init__(self, places: int, zygotes: int) -> None:
        self.places = max(1, places)
        self.zygotes = max(1, zygotes)
        self.pools: list[Member] = []

    def join(self, pool: Member) -> None:
        if not any(p is pool for p in self.pools):
            self.pools.append(pool)

    def leave(self, pool: Member) -> None:
        self.pools = [p for p in self.pools if p is not pool]
        self.changed()

    def all_zygotes(self) -> list[Zygote]:
        return [z for pool in self.pools for z in pool.zygotes]

    def running(self) -> list[Zygote]:
        """The zygotes reserved for or running a run, in every pool."""
        return [z for z in self.all_zygotes() if z.run is not None]

    def held(self) -> int:
        """Zygotes alive (starting, idle or busy) in every pool."""
        return sum(len(pool.zygotes) for pool in self.pools)

    def has_room(self) -> bool:
        return self.held() < self.zygotes

    def victim(self, pool: Member, tenant: str) -> Zygote | None:
        """The idle zygote the budget gives up so that ``pool`` can start one for
        ``tenant`` (see the module's docstring); None: every zygote is busy."""
        holders = {id(p) for p in self.pools if p.zygotes} | {id(pool)}
        share = max(1, self.zygotes // len(holders))
        at_share = len(pool.zygotes) >= share
        if at_share and (own := pool._victim(tenant)) is not None:
            return own
        others = [
            z
            for p in self.pools
            if p is not pool
            for z in p.zygotes
            if z.state == "idle" and z.run is None
        ]
        over = [z for z in others if len(z.pool.zygotes) > share]
        candidates = over if at_share else (over or others)
        if candidates:  # spares first, then the least recently used
            return min(candidates, key=lambda z: (z.tenant is not None, z.last_used))
        return None if at_share else pool._victim(tenant)

    def changed(self) -> None:
        """Wake every pool's upkeep (a zygote retired: room for another's spare)."""
        for pool in self.pools:
            pool.changed()

    def freed(self) -> None:
        """A run's place freed: whoever waits on any pool for one may start."""
        for pool in self.pools:
            pool.notify_free()

    def describe(self) -> dict[str, int]:
        return {
            "places": self.places,
            "zygotes": self.zygotes,
            "running": len(self.running()),
            "held": self.held(),
            "pools": len(self.pools),
        }
