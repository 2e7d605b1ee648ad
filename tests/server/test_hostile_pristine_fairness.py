"""One client against the pristine runs (issue 33, item 3): Mallory, behind a trusted
proxy (X-Forwarded-For), with several page sessions and addresses, makes her own
pristine runs slow (``if pristine: sleep``) and floods the server with shares and
reads of her candidates, to keep a victim's popular request unconfirmed or to push
the victim's pristine run out of line. The pristine lines (backend/app/trust/pristine_lines.py)
hold her to her own group's turn, place, cap and budget: the victim's key starts
while her backlog still waits, and is never dropped."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.app.tenancy.identity import SESSION_COOKIE
from backend.app.trust import confirm
from sandbox.pool.base import PoolFull
from sandbox.protocol import RunRequest

from .conftest import make_settings
from .fakes import FakePool, HeldRun
from .test_hostile_clients import PEER, Peers

PROXY = "10.0.0.1"  # the trusted proxy every client comes through
MALLORY = "203.0.113.66"
ALICE, BOB, CAROL = "198.51.100.1", "198.51.100.2", "198.51.100.3"
POPULAR = {"code": "def f(x):\n    return x\n# popular\n", "outputs": ["jaxpr", "value"]}


class SlowPristineRun(HeldRun):
    """Mallory's code makes its pristine runs slow (``if pristine: sleep``), and only
    those: her own runs are quick. Here they last until the test opens the pool's
    ``mallory_gate`` (so the test waits for events, never races a time)."""

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        pool = self.pool
        assert isinstance(pool, MalloryPool)
        if self.pristine and "# mallory" in self.request.code:
            while not pool.mallory_gate.is_set():
                await asyncio.sleep(0.01)
        async for event in super().events():
            yield event


class MalloryPool(FakePool):
    def __init__(self, max_concurrent: int) -> None:
        super().__init__(max_concurrent)
        self.mallory_gate = threading.Event()

    async def submit(self, request: RunRequest, tenant: str, **options: Any) -> Any:
        run = await super().submit(request, tenant, **options)
        run.__class__ = SlowPristineRun
        return run

    def pristine_order(self) -> list[str]:
        """The pristine runs' code, in the order they were submitted."""
        return [
            r.code for r, pristine in zip(self.requests, self.pristine, strict=True) if pristine
        ]


class SparesPool(MalloryPool):
    """A pristine run takes a ready spare (as the jailed pool's do) and there are
    ``spares`` of them; ``make_spare`` readies one and says so (``on_free``), as the
    jailed pool does when a spare's jail has started."""

    def __init__(self, max_concurrent: int, spares: int) -> None:
        super().__init__(max_concurrent)
        self.spares = spares
        self.listeners: list[Any] = []

    def on_free(self, listener: Any) -> None:
        self.listeners.append(listener)

    def make_spare(self) -> None:
        self.spares += 1
        for listener in self.listeners:
            listener()

    async def submit_pristine(self, request: RunRequest, asked_by: str) -> Any:
        if self.spares == 0:
            raise PoolFull("no spare sandbox is ready for a pristine run", retry_after_s=2.0)
        self.spares -= 1
        return await super().submit_pristine(request, asked_by)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    clients: list[TestClient] = []

    def make(pool: MalloryPool | None = None, **overrides: Any) -> tuple[TestClient, MalloryPool]:
        pool = pool or MalloryPool(max_concurrent=16)
        settings = make_settings(
            tmp_path,
            trusted_proxies=["10.0.0.0/8"],
            snippet_rate_per_minute=0,
            max_runs_per_client=16,
            **{"pristine_concurrency": 2, **overrides},
        )
        client = TestClient(Peers(create_app(settings, pool=pool, pool_name="fake")))
        client.__enter__()
        clients.append(client)
        return client, pool

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def via_proxy(address: str, cookie: str | None = None) -> dict[str, str]:
    headers = {PEER: PROXY, "X-Forwarded-For": address}
    if cookie is not None:
        headers["Cookie"] = f"{SESSION_COOKIE}={cookie}"
    return headers


def page_session(client: TestClient, address: str) -> str:
    """A new page session (the client's own cookie jar kept empty: each request says
    its session in its own headers)."""
    client.cookies.clear()
    cookie = str(client.get("/", headers=via_proxy(address)).cookies[SESSION_COOKIE])
    client.cookies.clear()
    return cookie


def run(client: TestClient, body: dict[str, Any], headers: dict[str, str]) -> list[dict[str, Any]]:
    r = client.post("/api/v1/runs", json=body, headers=headers)
    assert r.status_code == 200, r.text
    events: list[dict[str, Any]] = r.json()["events"]
    assert events[-1]["status"] == "ok", events[-1]
    return events


def share(client: TestClient, body: dict[str, Any], headers: dict[str, str]) -> None:
    r = client.post("/api/v1/snippets", json=body, headers=headers)
    assert r.status_code == 201, r.text


def confirmer(client: TestClient) -> Any:
    return client.app.app.state.services.runs.confirmer  # type: ignore[attr-defined]


def mallory_floods(client: TestClient, addresses: list[str], keys_each: int) -> None:
    """From each address, several page sessions: a candidate of her own each, shared."""
    for address in addresses:
        sessions = [page_session(client, address) for _ in range(3)]
        a = address.rsplit(".", 1)[1]
        for i in range(keys_each):
            body = {"code": f"def f(x):\n    return x\n# mallory {a}.{i}\n", "outputs": ["value"]}
            headers = via_proxy(address, sessions[i % len(sessions)])
            run(client, body, headers)
            share(client, body, headers)


def state_of(client: TestClient, body: dict[str, Any]) -> str:
    """The cache entry's state for ``body``, as any request would find it."""
    services = client.app.app.state.services  # type: ignore[attr-defined]
    request = services.runs.prepare(RunRequest.model_validate(body))
    state, _ = client.portal.call(services.cache.lookup, request)  # type: ignore[union-attr]
    return str(state)


def wait_until(what: Any, timeout_s: float = 30.0) -> None:
    """A bound on a deadlock, not a speed: the condition is an event."""
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, "the condition did not come"
        time.sleep(0.005)


def test_one_client_flooding_shares_does_not_hold_a_popular_request(serve: Any) -> None:
    client, pool = serve(pristine_per_group=4)
    run(client, {"code": "def g():\n    return 0\n"}, via_proxy(ALICE))  # meets the worker
    mallory_floods(client, [MALLORY], keys_each=12)
    stats = confirmer(client).stats()
    # one of her runs holds a place, three wait: her cap; the other eight were refused
    assert stats["running"] == 1 and stats["waiting"] == 3, stats
    assert stats["refused_group_cap"] == 8, stats
    # The victim's popular request: Alice's candidate, Bob reads it.
    run(client, POPULAR, via_proxy(ALICE, page_session(client, ALICE)))
    bob = run(client, POPULAR, via_proxy(BOB, page_session(client, BOB)))
    assert "cached" not in bob[0]  # Bob never waits for a pristine run in line
    # Confirmed beside Mallory's slow pristine run, while all her backlog still waits.
    wait_until(lambda: state_of(client, POPULAR) == "hit")
    stats = confirmer(client).stats()
    assert stats["running"] == 1 and stats["waiting"] == 3 and stats["runs"] == 1, stats
    carol = run(client, POPULAR, via_proxy(CAROL))
    assert carol[0]["cached"] is True and carol[-1]["cached"] is True
    pool.mallory_gate.set()
    wait_until(lambda: confirmer(client).stats()["waiting"] == 0)


def test_a_client_cannot_push_another_group_s_pristine_run_out_of_line(serve: Any) -> None:
    """One pristine place; the lines hold 6 keys. Mallory holds the place with a slow
    run and fills the lines from many addresses after the victim's key is in line:
    her asks past the room are refused, the victim's key is never dropped, and it
    starts at the victim's turn: after one of hers (her group was in line first),
    before any of her other addresses'."""
    client, pool = serve(pristine_concurrency=1, pristine_queue=6, pristine_per_group=2)
    run(client, {"code": "def g():\n    return 0\n"}, via_proxy(ALICE))
    mallory_floods(client, [MALLORY], keys_each=2)  # one running, one waiting
    run(client, POPULAR, via_proxy(ALICE, page_session(client, ALICE)))
    run(client, POPULAR, via_proxy(BOB, page_session(client, BOB)))  # the victim's ask
    assert confirmer(client).stats()["waiting"] == 2
    others = [f"203.0.113.{i}" for i in range(100, 110)]
    mallory_floods(client, others, keys_each=2)  # 20 asks from 10 more addresses
    stats = confirmer(client).stats()
    assert stats["waiting"] == 6 and stats["refused_full"] == 16, (stats, pool.pristine_order())
    assert state_of(client, POPULAR) == "candidate"
    pool.mallory_gate.set()
    wait_until(lambda: state_of(client, POPULAR) == "hit")
    order = pool.pristine_order()
    assert [c.rsplit("# ", 1)[1] for c in order[:3]] == [
        "mallory 66.0\n",
        "mallory 66.1\n",
        "popular\n",
    ]
    assert run(client, POPULAR, via_proxy(CAROL))[0]["cached"] is True
    wait_until(lambda: confirmer(client).stats()["waiting"] == 0)


def test_a_client_that_asks_for_the_victim_s_key_first_cannot_hold_it(serve: Any) -> None:
    """Mallory reads the victim's fresh candidate herself, behind her own slow keys in
    her line; the victim's reader's ask starts it at the victim's turn, after one more
    of hers (her group was in line first), not after all of them."""
    client, pool = serve(pristine_concurrency=1, pristine_per_group=8)
    run(client, {"code": "def g():\n    return 0\n"}, via_proxy(ALICE))
    mallory_floods(client, [MALLORY], keys_each=4)  # one running, three waiting
    run(client, POPULAR, via_proxy(ALICE, page_session(client, ALICE)))
    run(client, POPULAR, via_proxy(MALLORY, page_session(client, MALLORY)))  # her line's 4th
    run(client, POPULAR, via_proxy(BOB, page_session(client, BOB)))  # the victim's line
    pool.mallory_gate.set()
    wait_until(lambda: state_of(client, POPULAR) == "hit")
    stats = lambda: confirmer(client).stats()  # noqa: E731
    wait_until(lambda: stats()["waiting"] == 0 and stats()["running"] == 0)
    order = pool.pristine_order()
    assert [c.rsplit("# ", 1)[1] for c in order] == [
        "mallory 66.0\n",
        "mallory 66.1\n",
        "popular\n",
        "mallory 66.2\n",
        "mallory 66.3\n",
    ]


def test_a_probe_s_answer_does_not_wait_for_the_pristine_run_it_asked_for(serve: Any) -> None:
    """Issue 33, item 7: whether someone ran an exact request cannot be read from how
    long a probe's answer takes. Mallory probes for Alice's request: her request finds
    Alice's candidate and asks for its pristine run (held here until the test opens
    the gate), and is answered without waiting for it — as fast as a request nobody
    ran before, which finds no candidate at all."""
    # a join would wait up to 600 s here: a probe that waits shows as a deadlock
    client, pool = serve(pristine_concurrency=1, cache_join_wait_s=600, queue_timeout_s=600)
    run(client, {"code": "def g():\n    return 0\n"}, via_proxy(ALICE))
    secret = {"code": "def f(x):\n    return x\n# mallory's guess\n", "outputs": ["value"]}
    run(client, secret, via_proxy(ALICE, page_session(client, ALICE)))
    mallory = via_proxy(MALLORY, page_session(client, MALLORY))
    answers: list[list[dict[str, Any]]] = []
    prober = threading.Thread(target=lambda: answers.append(run(client, secret, mallory)))
    prober.start()
    prober.join(30)  # a bound on a deadlock, not a speed: the pristine run is held
    if prober.is_alive():
        pool.mallory_gate.set()
        prober.join()
        pytest.fail("the probe waited for the pristine run its own request asked for")
    # answered while the pristine run her request asked for is still held
    stats = confirmer(client).stats()
    assert stats["running"] == 1 and stats.get("runs", 0) == 0, stats
    assert "cached" not in answers[0][0] and answers[0][-1]["status"] == "ok"
    pool.mallory_gate.set()
    wait_until(lambda: state_of(client, secret) == "hit")


def test_a_victim_s_pristine_run_starts_as_soon_as_a_spare_is_ready(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mallory's slow pristine run took the only spare; the victim's key, asked for
    meanwhile, starts when the pool says the next spare is ready, not at the
    confirmer's next look (made ten minutes here, so only the pool's word can start it)."""
    monkeypatch.setattr(confirm, "RETRY_S", 600.0)
    client, pool = serve(SparesPool(max_concurrent=16, spares=1), pristine_per_group=4)
    assert isinstance(pool, SparesPool)
    run(client, {"code": "def g():\n    return 0\n"}, via_proxy(ALICE))
    mallory_floods(client, [MALLORY], keys_each=2)
    wait_until(lambda: confirmer(client).stats()["running"] == 1 and pool.spares == 0)
    run(client, POPULAR, via_proxy(ALICE, page_session(client, ALICE)))
    run(client, POPULAR, via_proxy(BOB, page_session(client, BOB)))
    wait_until(lambda: confirmer(client).stats().get("no_place", 0) >= 1)
    assert state_of(client, POPULAR) == "candidate"  # no spare: it waits in line
    client.portal.call(pool.make_spare)  # type: ignore[union-attr]
    wait_until(lambda: state_of(client, POPULAR) == "hit")
    assert confirmer(client).stats()["running"] == 1  # Mallory's is still running
    pool.mallory_gate.set()
