"""The hostile battery, client side: what a client claims is not believed.

Spoofed ``X-Forwarded-For`` and tokens, forged session cookies, one client with many
sockets or sessions, a foreign ``Origin``, lone surrogates, snippet and lookup
floods, the page's security headers. Each test asserts the safe outcome and that
the next ordinary run is normal. On the fake pool (fast); the cache bypasses with
real randomness and clocks, through the real jailed pool, are in
test_hostile_cache.py.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.app import create_app
from backend.app.core.logs import redact_url
from backend.app.core.metrics import Metrics
from backend.app.tenancy.admission import Admission, FairQueue
from backend.app.tenancy.caller import Caller
from backend.app.tenancy.identity import SESSION_COOKIE, client_key
from backend.app.web.page import PLACEHOLDER
from sandbox.pool.base import PoolFull
from sandbox.pool.zygote_pool import ZygotePool, tenant_group
from sandbox.protocol.tenants import is_single_use

from .conftest import make_settings
from .fakes import FakePool

CODE = "def f(x):\n    return x\n"
PEER = "x-test-peer"  # the TCP peer a test pretends to be (see ``Peers``)


class Peers:
    """Test-only ASGI wrapper: the request's TCP peer is the ``x-test-peer`` header,
    so one TestClient can be many machines. It sits outside the whole app, exactly
    where the network would put the peer's address."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            for name, value in scope.get("headers", []):
                if name == PEER.encode():
                    scope = {**scope, "client": (value.decode(), 40000)}
        await self.app(scope, receive, send)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    clients: list[TestClient] = []

    def make(pool: FakePool | None = None, **overrides: Any) -> tuple[TestClient, FakePool]:
        pool = pool or FakePool(max_concurrent=8)
        settings = make_settings(tmp_path, **overrides)
        client = TestClient(Peers(create_app(settings, pool=pool, pool_name="fake")))
        client.__enter__()
        clients.append(client)
        return client, pool

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def run(client: TestClient, peer: str, **headers: str) -> Any:
    body = {"code": CODE, "args": "(1.0,)", "outputs": ["jaxpr", "value"], "cache": False}
    return client.post("/api/v1/runs", json=body, headers={PEER: peer, **headers})


def normal(client: TestClient, peer: str = "192.0.2.200") -> None:
    """The next ordinary run, from an innocent client, works."""
    r = run(client, peer)
    assert r.status_code == 200, r.text
    assert r.json()["events"][-1]["status"] == "ok"


# --- addresses: X-Forwarded-For, IPv6 ------------------------------------------------


def addresses(tenants: list[str]) -> list[str]:
    """The addresses of address-only runs as the pool was given them: each a
    single-use tenant of its address's group (issue 33: nothing kept for an address)."""
    assert all(is_single_use(t) for t in tenants), tenants
    return [tenant_group(t) for t in tenants]


def test_a_spoofed_forwarded_for_is_ignored_by_default(serve: Any) -> None:
    client, pool = serve(rate_limit_per_minute=6, rate_limit_burst=1)
    assert run(client, "198.51.100.7", **{"X-Forwarded-For": "203.0.113.1"}).status_code == 200
    # Another claimed address buys nothing: the peer pays, and it has spent its burst.
    r = run(client, "198.51.100.7", **{"X-Forwarded-For": "203.0.113.2"})
    assert r.status_code == 429 and r.json()["error"] == "rate_limited"
    assert addresses(pool.tenants) == ["addr:198.51.100.7"]
    normal(client)


def test_forwarded_for_is_believed_only_from_a_trusted_proxy(serve: Any) -> None:
    client, pool = serve(
        rate_limit_per_minute=6, rate_limit_burst=1, trusted_proxies=["10.0.0.0/8"]
    )
    # Through the proxy: the client it forwarded (the rightmost address it did not add
    # itself), whatever the client wrote before it.
    xff = {"X-Forwarded-For": "203.0.113.99, 198.51.100.20"}
    assert run(client, "10.1.2.3", **xff).status_code == 200
    assert run(client, "10.1.2.3", **{"X-Forwarded-For": "198.51.100.21"}).status_code == 200
    assert run(client, "10.1.2.3", **xff).status_code == 429  # .20 again: its own bucket
    # Not through the proxy: the header is the client's word, and is not taken.
    assert run(client, "198.51.100.30", **{"X-Forwarded-For": "10.0.0.1"}).status_code == 200
    assert run(client, "198.51.100.30", **{"X-Forwarded-For": "10.0.0.2"}).status_code == 429
    assert addresses(pool.tenants) == [
        "addr:198.51.100.20",
        "addr:198.51.100.21",
        "addr:198.51.100.30",
    ]
    normal(client)


def test_ipv6_clients_are_one_client_per_56() -> None:
    """A subscriber is commonly handed a /56: its 256 /64s are one client."""
    assert client_key("2001:db8:1:2::1") == client_key("2001:db8:1:2:ffff::9")
    assert client_key("2001:db8:1:2::1") == client_key("2001:db8:1:ff::1")
    assert client_key("2001:db8:1:2::1") == "addr:2001:db8:1::/56"
    assert client_key("2001:db8:1:100::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:192.0.2.1") == client_key("192.0.2.1") == "addr:192.0.2.1"
    assert client_key("not an address").startswith("addr:?")


def test_an_ipv6_subnet_shares_its_limits(serve: Any) -> None:
    client, _pool = serve(rate_limit_per_minute=6, rate_limit_burst=2)
    assert run(client, "2001:db8:1:2::1").status_code == 200
    assert run(client, "2001:db8:1:2::2").status_code == 200
    assert run(client, "2001:db8:1:3::3").status_code == 429  # another /64, the same /56
    assert run(client, "2001:db8:1:100::1").status_code == 200  # the next /56
    normal(client)


# --- tokens and sessions --------------------------------------------------------------


def test_invented_tokens_name_no_tenant(serve: Any) -> None:
    client, pool = serve(api_tokens=["issued-token-0123456789"])
    for i, header in enumerate(("Authorization", "X-API-Token", "Authorization")):
        value = f"Bearer invented-{i}" if header == "Authorization" else f"invented-{i}"
        r = run(client, "198.51.100.7", **{header: value})
        assert r.status_code == 401 and r.json()["error"] == "invalid_token", r.text
    assert pool.total == 0  # not one ran, not one tenant made
    with client.websocket_connect(
        "/api/v1/ws?token=invented", headers={PEER: "198.51.100.7"}
    ) as ws:
        refused = ws.receive_json()
        assert refused["type"] == "error" and refused["payload"]["status"] == 401
    # The issued one is a tenant of its own.
    r = run(client, "198.51.100.7", Authorization="Bearer issued-token-0123456789")
    assert r.status_code == 200 and pool.tenants[-1].startswith("token:")
    normal(client)


def test_sessions_are_issued_by_the_page_and_forged_ones_are_nobody(serve: Any) -> None:
    client, pool = serve()
    page = client.get("/", headers={PEER: "198.51.100.7"})
    cookie = page.cookies[SESSION_COOKIE]
    assert "httponly" in page.headers["set-cookie"].lower()
    assert "samesite=lax" in page.headers["set-cookie"].lower()
    # The page's WebSocket carries the cookie: its tenant is that session.
    with client.websocket_connect(
        "/api/v1/ws", headers={PEER: "198.51.100.7", "Cookie": f"{SESSION_COOKIE}={cookie}"}
    ) as ws:
        ws.receive_json()
        ws.send_json({"type": "run", "seq": 1, "payload": {"code": CODE, "cache": False}})
        while ws.receive_json()["payload"].get("type") != "done":
            pass
    assert pool.tenants[-1].startswith("addr:198.51.100.7|session:")
    # A forged or altered cookie names no session: the address is the tenant.
    for forged in (cookie[:-2] + "xx", "made-up.value.sig", "a" * 500):
        client.cookies.clear()
        r = client.post(
            "/api/v1/runs",
            json={"code": CODE, "cache": False},
            headers={PEER: "198.51.100.7", "Cookie": f"{SESSION_COOKIE}={forged}"},
        )
        assert r.status_code == 200, forged
        assert addresses(pool.tenants[-1:]) == ["addr:198.51.100.7"], forged
    normal(client)


def test_many_sessions_of_one_address_share_its_two_runs(serve: Any) -> None:
    client, pool = serve(max_runs_per_client=2, max_runs_per_tenant=2)
    held = {"code": CODE + "# fake: held\n", "cache": False}  # runs until released
    cookies = [client.get("/", headers={PEER: "198.51.100.7"}).cookies[SESSION_COOKIE]]
    for _ in range(2):
        client.cookies.clear()
        cookies.append(client.get("/", headers={PEER: "198.51.100.7"}).cookies[SESSION_COOKIE])
    assert len(set(cookies)) == 3
    client.cookies.clear()

    statuses: list[int] = []

    def post(cookie: str) -> None:
        headers = {PEER: "198.51.100.7", "Cookie": f"{SESSION_COOKIE}={cookie}"}
        statuses.append(client.post("/api/v1/runs", json=held, headers=headers).status_code)

    threads = [threading.Thread(target=post, args=(c,)) for c in cookies]
    for t in threads:
        t.start()
    # two runs held (running) and the third refused, while they run: no time window
    deadline = time.monotonic() + 30
    while not (pool.held == 2 and statuses == [429]):
        assert time.monotonic() < deadline, (pool.held, statuses)
        time.sleep(0.01)
    pool.release()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200, 200, 429], statuses
    normal(client)


# --- WebSockets ---------------------------------------------------------------------


def test_one_client_cannot_hold_many_sockets(serve: Any) -> None:
    client, _pool = serve(max_websockets_per_client=3)
    me = {PEER: "198.51.100.7"}
    with (
        client.websocket_connect("/api/v1/ws", headers=me) as a,
        client.websocket_connect("/api/v1/ws", headers=me) as _b,
        client.websocket_connect("/api/v1/ws", headers=me) as _c,
    ):
        assert a.receive_json()["type"] == "hello"
        with client.websocket_connect("/api/v1/ws", headers=me) as d:
            refused = d.receive_json()
            assert refused["type"] == "error" and refused["payload"]["status"] == 429
        # Someone else is not affected, and the open ones still run.
        with client.websocket_connect("/api/v1/ws", headers={PEER: "198.51.100.8"}) as e:
            assert e.receive_json()["type"] == "hello"
        a.send_json({"type": "run", "seq": 1, "payload": {"code": CODE, "cache": False}})
        while (m := a.receive_json())["payload"].get("type") != "done":
            pass
        assert m["payload"]["status"] == "ok"
    # Closed again: the client may open a new one.
    with client.websocket_connect("/api/v1/ws", headers=me) as again:
        assert again.receive_json()["type"] == "hello"
    normal(client)


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("https://evil.example", False),
        ("http://testserver.evil.example", False),
        ("null", False),
        # the Host the request came to: with public_url set it is not the server's own
        # origin (a page that rebinds its DNS name to the server sends its own name)
        ("http://testserver", False),
        ("https://jaxplay.example", True),  # public_url
        ("https://embed.example", True),  # ws_origins
        ("https://api-user.example", True),  # cors_origins: may call the API, so may connect
        (None, True),  # not a browser (a script): nothing to protect
    ],
)
def test_a_foreign_origin_cannot_open_the_websocket(
    serve: Any, origin: str | None, allowed: bool
) -> None:
    client, pool = serve(
        public_url="https://jaxplay.example",
        ws_origins=["https://embed.example"],
        cors_origins=["https://api-user.example"],
    )
    headers = {PEER: "198.51.100.7"} | ({"Origin": origin} if origin else {})
    with client.websocket_connect("/api/v1/ws", headers=headers) as ws:
        first = ws.receive_json()
        if not allowed:
            assert first["type"] == "error" and first["payload"]["status"] == 403
            assert pool.total == 0
            return
        assert first["type"] == "hello"
        ws.send_json({"type": "run", "seq": 1, "payload": {"code": CODE, "cache": False}})
        while (m := ws.receive_json())["payload"].get("type") != "done":
            pass
        assert m["payload"]["status"] == "ok"


# --- fairness -------------------------------------------------------------------------


def test_the_queue_takes_clients_by_turns() -> None:
    queue = FairQueue()
    a1, a2, a3, b1, c1 = (asyncio.Event() for _ in range(5))
    for client, waiter in (("a", a1), ("a", a2), ("a", a3), ("b", b1), ("c", c1)):
        queue.add(client, waiter)
    order = []
    while (head := queue.head()) is not None:
        order.append(head)
        queue.remove(head, served=True)
    assert order == [a1, b1, c1, a2, a3]
    assert len(queue) == 0


def test_a_busy_client_does_not_keep_another_waiting_behind_it(tmp_path: Path) -> None:
    """Through Admission.submit with a pool of one: client A queues three runs, then
    B one; B's starts second, not fourth."""

    class OneAtATime:
        def __init__(self) -> None:
            self.busy = False
            self.order: list[str] = []

        async def submit(self, request: Any, tenant: str) -> Any:
            if self.busy:
                raise PoolFull("busy", retry_after_s=0.01)
            self.busy = True
            self.order.append(tenant)
            return SimpleNamespace(run_id=tenant)

    settings = make_settings(tmp_path, max_runs_per_client=8, max_runs_per_tenant=8)
    admission = Admission(settings, Metrics())
    pool = OneAtATime()

    entered: list[str] = []
    all_in = asyncio.Event()

    async def one(client: str, n: int, delay: float) -> None:
        await asyncio.sleep(delay)  # the order they come in (timers fire in order)
        caller = Caller(tenant=f"{client}|{n}", rate_key=client, client=client)
        ticket = admission.enter(caller, "cpu")
        entered.append(caller.tenant)
        if len(entered) == 5:
            all_in.set()
        await admission.submit(pool, None, ticket)  # type: ignore[arg-type]
        # the first run holds the pool until every run has come in: an event, not a
        # time window that a loaded machine could let it outlast
        await all_in.wait()
        pool.busy = False
        admission.release(ticket)

    async def go() -> None:
        await asyncio.gather(
            one("a", 0, 0.0), one("a", 1, 0.01), one("a", 2, 0.02), one("a", 3, 0.03),
            one("b", 0, 0.04),
        )  # fmt: skip

    asyncio.run(go())
    assert pool.order[:3] == ["a|0", "a|1", "b|0"], pool.order


def test_a_new_tenant_evicts_no_more_than_its_share_of_warm_zygotes() -> None:
    """Zygote eviction in a full pool of 4: client A (one address) holds 3 through
    three sessions; B holds 1. A's fourth session may only evict A's own zygote; B's
    second takes one of A's, never B's own."""
    pool = object.__new__(ZygotePool)
    pool.size = 4

    def zygote(tenant: str, used: float) -> SimpleNamespace:
        return SimpleNamespace(tenant=tenant, state="idle", run=None, last_used=used)

    a1, a2, a3 = (zygote(f"addr:A|session:{i}", used=i) for i in range(3))
    b1 = zygote("addr:B|session:0", used=-1)  # the least recently used of all
    pool.zygotes = [a1, a2, a3, b1]
    assert pool._victim("addr:A|session:9") is a1  # its own oldest, not B's older one
    assert pool._victim("addr:B|session:1") is a1  # A is over its share (2 of 4)
    assert pool._victim("addr:C") is a1
    a1.state = a2.state = a3.state = "busy"
    assert pool._victim("addr:A|session:9") is None  # its own are busy: it waits
    assert pool._victim("addr:B|session:1") is None


def test_a_client_alone_in_a_pool_the_budget_keeps_small_evicts_its_own() -> None:
    """One client (the browser tests' 127.0.0.1) holds every zygote of the default
    version's pool, under its share of the pool's size, while other JAX versions hold
    the rest of the machine's budget: a new session of it evicts the client's least
    recently used idle zygote (there is nobody else to be fair to), not nothing — which
    left its runs waiting until those versions' pools closed, minutes later."""
    pool = object.__new__(ZygotePool)
    pool.size = 8  # the budget's zygotes; four of them are held by other versions

    def zygote(tenant: str, used: float) -> SimpleNamespace:
        return SimpleNamespace(tenant=tenant, state="idle", run=None, last_used=used)

    a = [zygote(f"addr:A|session:{i}", used=i) for i in range(4)]
    pool.zygotes = list(a)
    assert pool._victim("addr:A|session:9") is a[0]
    for z in a:
        z.state = "busy"
    assert pool._victim("addr:A|session:9") is None  # all running: it waits for one


# --- the web ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "body"),
    [
        ("code", {"code": "\ud800"}),
        ("args", {"code": CODE, "args": "(\udfff,)"}),
        ("entry", {"code": CODE, "entry": "f\ud800"}),
        ("config.jax_numpy_dtype_promotion", {"code": CODE, "config": {"jax_numpy_dtype_promotion": "\ud800"}}),
        ("config.\\ud800", {"code": CODE, "config": {"\ud800": True}}),
        ("transforms.0.in_axes", {"code": CODE, "transforms": [{"name": "vmap", "in_axes": "\ud800"}]}),
        ("compare.0.0.name", {"code": CODE, "compare": [[{"name": "\udc00"}]]}),
    ],
)  # fmt: skip
def test_text_that_is_not_unicode_is_a_422_naming_the_field(
    serve: Any, field: str, body: dict[str, Any]
) -> None:
    import json

    client, pool = serve()
    raw = json.dumps(body).encode()  # ensure_ascii: the surrogate travels as \\udXXX
    for path in ("/api/v1/runs", "/api/v1/snippets"):
        r = client.post(path, content=raw, headers={"Content-Type": "application/json", PEER: "198.51.100.7"})  # fmt: skip
        assert r.status_code == 422, (path, r.text)
        assert r.json()["field"] == field and "Unicode" in r.json()["message"]
    with client.websocket_connect("/api/v1/ws", headers={PEER: "198.51.100.7"}) as ws:
        ws.receive_json()
        ws.send_text(json.dumps({"type": "run", "seq": 3, "payload": body}))
        error = ws.receive_json()
        assert error["type"] == "error" and error["seq"] == 3
        assert error["payload"]["status"] == 422
    assert pool.total == 0
    normal(client)


def test_the_page_and_shared_links_send_the_security_headers(serve: Any) -> None:
    client, _ = serve(frame_ancestors="'self' https://blog.example")
    sid = client.post("/api/v1/snippets", json={"code": CODE}, headers={PEER: "198.51.100.7"}).json()["id"]  # fmt: skip
    for path in ("/", f"/s/{sid}", "/s/nosuchsnippet", "/api/v1/backends", "/docs"):
        r = client.get(path, headers={PEER: "198.51.100.7"})
        csp = r.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "object-src 'none'" in csp, path
        assert "worker-src 'self';" in csp, path  # the Graph tab's layout worker, no blob:
        assert "base-uri 'none'" in csp and "frame-ancestors 'self' https://blog.example" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "no-referrer"
        assert "unsafe-inline" not in csp.split("script-src", 1)[1].split(";", 1)[0], path


def test_the_placeholder_page_s_inline_code_is_allowed_by_hash_only(serve: Any) -> None:
    client, _ = serve()
    csp = client.get("/").headers["content-security-policy"]
    script = re.search(r"<script>(.*?)</script>", PLACEHOLDER, re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert f"'sha256-{digest}'" in csp


def test_docs_serve_their_own_files(serve: Any) -> None:
    client, _ = serve()
    page = client.get("/docs").text
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and all(s.startswith("/") for s in sources), sources
    for source in sources:
        r = client.get(source)
        assert r.status_code == 200 and len(r.content) > 100, source
    assert "SwaggerUIBundle" in client.get("/docs/start.js").text


def test_snippet_creation_is_rate_limited_and_capped(serve: Any) -> None:
    client, _ = serve(snippet_rate_per_minute=6, snippet_rate_burst=3, max_snippet_bytes=4096)
    me = {PEER: "198.51.100.7"}
    statuses = [
        client.post("/api/v1/snippets", json={"code": f"x = {i}\n"}, headers=me).status_code
        for i in range(4)
    ]
    assert statuses == [201, 201, 201, 429]
    other = {PEER: "198.51.100.8"}
    big = client.post("/api/v1/snippets", json={"code": "#" * 5000}, headers=other)
    assert big.status_code == 413 and big.json()["error"] == "too_large"
    assert (
        client.post("/api/v1/snippets", json={"code": "y = 1\n"}, headers=other).status_code == 201
    )
    normal(client)


def test_guessing_snippet_ids_is_rate_limited(serve: Any) -> None:
    client, _ = serve(not_found_rate_per_minute=6)
    me = {PEER: "198.51.100.7"}
    sid = client.post("/api/v1/snippets", json={"code": CODE}, headers=me).json()["id"]
    statuses = [
        client.get(f"/api/v1/snippets/guess{i:04d}", headers=me).status_code for i in range(25)
    ]
    assert statuses[:20] == [404] * 20 and set(statuses[20:]) == {429}
    # Now even a real id answers 429 to it: a hit cannot be told from a miss.
    assert client.get(f"/api/v1/snippets/{sid}", headers=me).status_code == 429
    assert client.get(f"/s/{sid}", headers=me).status_code == 429
    # Another client is not affected.
    assert client.get(f"/s/{sid}", headers={PEER: "198.51.100.8"}).status_code == 200
    normal(client)


def test_database_and_redis_urls_are_redacted_in_logs() -> None:
    assert redact_url("postgresql://jaxplay:s3cret@db:5432/jaxplay") == (
        "postgresql://jaxplay:***@db:5432/jaxplay"
    )
    assert redact_url("redis://:pw@redis:6379/0") == "redis://:***@redis:6379/0"
    assert redact_url("redis://server:pw@redis:6379/0") == "redis://server:***@redis:6379/0"
    assert redact_url("rediss://token@redis:6380/0?password=x") == "rediss://***@redis:6380/0?***"
    assert redact_url("sqlite:///var/jaxplay.sqlite3") == "sqlite:///var/jaxplay.sqlite3"
    assert redact_url("redis://redis:6379/0") == "redis://redis:6379/0"
