"""A library choice through the queue (issue 22): a worker registers the alternatives its
local pool runs (the overlays installed beside it, sandbox/environments/library_choices.py), the
server offers what every live worker registered and hands the choice on with the job.
Fake local pools (no JAX), a real redis-server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sandbox.environments import libraries, library_choices
from sandbox.environments.library_choices import LibraryUnavailable
from sandbox.pool.fake import FakePool
from tests.queue.test_queue import Cluster, go, request
from tests.support.services import RedisServer

pytestmark = pytest.mark.timeout(60)

#: a JAX version with a committed library lock (its defaults come from it)
VERSION = "0.12.0.1"
DEFAULT = libraries.offered(VERSION)["optax"]


class ChoosingFake(FakePool):
    """A fake local pool that runs the given alternatives, as the versioned pool does."""

    def __init__(self, alternatives: dict[str, list[str]]) -> None:
        super().__init__(max_concurrent=2)
        self.alternatives = alternatives
        self.worker = dict(self.worker, jax_version=VERSION, libraries=libraries.offered(VERSION))

    def library_menu(self, version: str) -> dict[str, dict[str, object]]:
        return {
            name: {"default": v, "alternatives": self.alternatives.get(name, [])}
            for name, v in libraries.offered(version).items()
        }

    def resolve_libraries(
        self, version: str | None, choices: dict[str, str]
    ) -> tuple[tuple[str, str], ...]:
        return library_choices.choose(VERSION, choices, self.library_menu(VERSION))


def test_the_server_offers_what_every_worker_registered_and_the_job_carries_the_pick(
    redis_server: RedisServer, prefix: str
) -> None:
    async def main() -> None:
        c = Cluster(redis_server.url, prefix)
        try:
            one = ChoosingFake({"optax": ["0.2.6"]})
            await c.worker(pool=one)
            pool = await c.start_pool()
            assert pool.library_menu(VERSION)["optax"] == {
                "default": DEFAULT,
                "alternatives": ["0.2.6"],
            }
            assert pool.resolve_libraries(None, {"optax": "0.2.6"}) == (("optax", "0.2.6"),)
            assert pool.resolve_libraries(VERSION, {"optax": DEFAULT}) == ()
            with pytest.raises(LibraryUnavailable, match=r"optax 0\.0\.1 is not offered"):
                pool.resolve_libraries(None, {"optax": "0.0.1"})
            # another version's menu: the workers registered none for it
            assert pool.library_menu("0.4.38")["optax"]["alternatives"] == []

            picked = request(libraries={"optax": "0.2.6"})
            events = [e async for e in (await pool.submit(picked, "t")).events()]
            assert events[-1]["status"] == "ok", events[-1]
            assert one.requests[-1].libraries == {"optax": "0.2.6"}
            # accepted's worker is the registered one, naming the version the run picked
            # (the owner registered it among its alternatives); the rest of its set as is
            assert events[0]["worker"]["libraries"] == {
                **libraries.offered(VERSION),
                "optax": "0.2.6",
            }
            events = [e async for e in (await pool.submit(request(), "t")).events()]
            assert events[0]["worker"]["libraries"] == libraries.offered(VERSION)

            # a worker without the overlay joins: a pick could land on it, so none is offered
            await c.worker(pool=ChoosingFake({}))
            for _ in range(100):
                await pool.refresh()
                if len(pool.stats()["backends"]["cpu"]["workers"]) == 2:
                    break
                await asyncio.sleep(0.05)
            assert pool.library_menu(VERSION)["optax"]["alternatives"] == []
            with pytest.raises(LibraryUnavailable, match=rf"optax {DEFAULT} \(default\)$"):
                pool.resolve_libraries(None, {"optax": "0.2.6"})
        finally:
            await c.close()

    go(main())


def test_a_worker_s_malformed_alternatives_offer_nothing(
    redis_server: RedisServer, prefix: str
) -> None:
    async def main() -> None:
        c = Cluster(redis_server.url, prefix)
        try:
            w = await c.worker(pool=ChoosingFake({"optax": ["0.2.6"]}))
            bad: Any = {"optax": "0.2.6", 3: ["x"]}  # a string, not a list; a key not a name
            w.info.alternatives = bad
            await w._heartbeat()
            pool = await c.start_pool()
            assert pool.library_menu(VERSION)["optax"]["alternatives"] == []
        finally:
            await c.close()

    go(main())
