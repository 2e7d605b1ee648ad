"""DNS rebinding, tokens in URLs and the metrics page (issue 20, items 9 and 10).

A page on ``http://rebind.test`` whose name its owner points at 127.0.0.1 is, to the
browser, same-origin with a jaxplay on loopback; its requests still carry
``Host: rebind.test``. Without ``public_url`` the server answers only the hosts it is
configured for, with or without ``public_url`` (issue 33: behind a proxy that
forwards any ``Host``, the check is the server's own)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from backend.app.core.settings import Settings
from backend.app.web.middleware import host_allowed, served_hosts
from tests.support.live_server import LiveServer

Make = Callable[..., tuple[TestClient, Any]]
CODE = "def f(x):\n    return x * 2\n"
REBIND = {"Host": "rebind.test", "Origin": "http://rebind.test"}


def test_the_host_names_allowed() -> None:
    loopback = ["localhost", "127.0.0.1", "[::1]"]
    for host in ("localhost", "localhost:8000", "127.0.0.1:9", "[::1]:8000", "[::1]", "LocalHost"):
        assert host_allowed(host, loopback), host
    for host in ("rebind.test", "rebind.test:8000", "localhost.rebind.test", "", "[::1]x", "[::2]"):
        assert not host_allowed(host, loopback), host
    assert host_allowed("a.example:8000", ["a.example:8000"])
    assert not host_allowed("a.example:8001", ["a.example:8000"])
    assert host_allowed("anything", ["*"])


@pytest.mark.slow
def test_a_rebound_name_reaches_nothing_through_a_real_server(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "r.sqlite3", "--pool", "fake").start()
    try:
        for path in ("/", "/healthz", "/api/v1/backends"):
            r = httpx.get(live.url + path, headers=REBIND, timeout=10)
            assert r.status_code == 421, (path, r.text)
            body = r.json()
            assert body["status"] == 421 and body["error"] == "misdirected_request"
            assert "rebind.test" in body["message"]
        r = httpx.post(live.url + "/api/v1/runs", json={"code": CODE}, headers=REBIND, timeout=10)
        assert r.status_code == 421 and r.json()["error"] == "misdirected_request"
        # The same server under its own name is fine.
        assert httpx.get(live.url + "/healthz", timeout=10).status_code == 200
        port = live.url.rsplit(":", 1)[1]
        headers = {"Host": f"localhost:{port}"}
        assert httpx.get(live.url + "/healthz", headers=headers, timeout=10).status_code == 200
    finally:
        live.stop()


def test_a_rebound_websocket_is_closed_with_a_policy_code(make_client: Make) -> None:
    client, pool = make_client()
    with client.websocket_connect("/api/v1/ws", headers=REBIND) as ws:
        refused = ws.receive_json()
        assert refused["type"] == "error" and refused["payload"]["status"] == 421
        closed = ws.receive()
        assert closed["type"] == "websocket.close" and closed["code"] == 1008
    assert pool.total == 0
    # The page's own host still connects and runs.
    with client.websocket_connect("/api/v1/ws", headers={"Origin": "http://testserver"}) as ws:
        assert ws.receive_json()["type"] == "hello"


#: Every route a rebinding page would use to act as its visitor: runs, snippets,
#: across, and reads (a JSON body each, or none).
REBIND_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/api/v1/runs", {"code": CODE}),
    ("POST", "/api/v1/runs?cache=false", {"code": CODE}),
    ("POST", "/api/v1/snippets", {"code": CODE}),
    ("POST", "/api/v1/across", {"request": {"code": CODE}, "versions": ["0.0.a", "0.0.b"]}),
    ("GET", "/api/v1/backends", None),
    ("GET", "/", None),
    ("GET", "/healthz", None),
]


@pytest.mark.parametrize("public_url", [None, "https://jaxplay.example"])
def test_a_rebound_name_is_misdirected_on_every_route(make_client: Make, public_url: Any) -> None:
    """Issue 33, item 5: with or without a public URL (behind a proxy that forwards any
    Host, as compose's nginx does), a rebinding page's requests reach nothing: 421 on
    every route, the WebSocket refused with 421 and 1008; no run, no snippet."""
    client, pool = make_client(public_url=public_url)
    for method, path, body in REBIND_ROUTES:
        for host in ("rebind.test", "rebind.test:8000", "jaxplay.example.rebind.test"):
            headers = {"Host": host, "Origin": f"http://{host}"}
            r = client.request(method, path, json=body, headers=headers)
            assert r.status_code == 421, (public_url, method, path, host, r.text)
            assert r.json()["error"] == "misdirected_request"
    with client.websocket_connect("/api/v1/ws", headers=REBIND) as ws:
        refused = ws.receive_json()
        assert refused["type"] == "error" and refused["payload"]["status"] == 421
        assert ws.receive()["code"] == 1008
    assert pool.total == 0


def test_the_public_url_s_host_is_served_and_still_not_the_origin_of_others(
    make_client: Make,
) -> None:
    client, pool = make_client(public_url="https://jaxplay.example")
    # The proxy forwards the public name, with or without a port: served.
    for host in ("jaxplay.example", "jaxplay.example:443", "JAXPLAY.example"):
        assert client.get("/healthz", headers={"Host": host}).status_code == 200, host
    r = client.post(
        "/api/v1/runs", json={"code": CODE, "cache": False}, headers={"Host": "jaxplay.example"}
    )
    assert r.status_code == 200 and r.json()["events"][-1]["status"] == "ok"
    # A page on another origin, through the public name, still may not open the socket.
    foreign = {"Host": "jaxplay.example", "Origin": "http://rebind.test"}
    with client.websocket_connect("/api/v1/ws", headers=foreign) as ws:
        refused = ws.receive_json()
        assert refused["type"] == "error" and refused["payload"]["status"] == 403
    origin = {"Host": "jaxplay.example", "Origin": "https://jaxplay.example"}
    with client.websocket_connect("/api/v1/ws", headers=origin) as ws:
        assert ws.receive_json()["type"] == "hello"
    assert pool.total == 1


def test_the_names_served_by_default() -> None:
    """Loopback names, the public URL's host and a bound address that is one address."""
    loopback = ["localhost", "127.0.0.1", "[::1]"]
    assert served_hosts(loopback, None, "127.0.0.1") == loopback
    assert served_hosts(loopback, None, "0.0.0.0") == loopback  # every interface: no name
    assert served_hosts(loopback, None, "::") == loopback
    assert served_hosts(loopback, None, "192.0.2.7")[-1] == "192.0.2.7"
    assert served_hosts(loopback, None, "2001:db8::7")[-1] == "[2001:db8::7]"
    assert served_hosts([], "https://Jaxplay.example:8443/x", "0.0.0.0") == ["jaxplay.example"]
    assert served_hosts([], "http://[2001:db8::1]:8000", "") == ["[2001:db8::1]"]
    served = served_hosts(loopback, "https://jaxplay.example", "10.1.2.3")
    for host in ("jaxplay.example", "jaxplay.example:443", "10.1.2.3:8000", "localhost:8000"):
        assert host_allowed(host, served), host
    for host in ("rebind.test", "10.1.2.4", "jaxplay.example.rebind.test", "example"):
        assert not host_allowed(host, served), host


def test_a_server_bound_to_an_address_answers_to_it(make_client: Make) -> None:
    client, _pool = make_client(host="192.0.2.7", allowed_hosts=["localhost"])
    assert client.get("/healthz", headers={"Host": "192.0.2.7:8000"}).status_code == 200
    assert client.get("/healthz", headers={"Host": "192.0.2.8:8000"}).status_code == 421


# --- tokens: in headers only, for REST -------------------------------------------------


def test_a_token_in_a_rest_url_is_refused(make_client: Make) -> None:
    client, pool = make_client(api_tokens=["issued-token-0123456789"])
    for token in ("issued-token-0123456789", "invented"):
        r = client.post("/api/v1/runs", params={"token": token}, json={"code": CODE})
        assert r.status_code == 400, r.text
        body = r.json()
        assert body["error"] == "token_in_url" and body["field"] == "token"
        assert "Authorization: Bearer" in body["message"]
    assert pool.total == 0
    headers = {"Authorization": "Bearer issued-token-0123456789"}
    r = client.post("/api/v1/runs", json={"code": CODE, "cache": False}, headers=headers)
    assert r.status_code == 200 and any(t.startswith("token:") for t in pool.tenants)


def test_the_websocket_keeps_its_token_parameter(make_client: Make) -> None:
    """Browsers cannot set a WebSocket's headers: there the query names the token."""
    client, pool = make_client(api_tokens=["issued-token-0123456789"])
    with client.websocket_connect("/api/v1/ws?token=issued-token-0123456789") as ws:
        assert ws.receive_json()["type"] == "hello"
        ws.send_json({"type": "run", "seq": 1, "payload": {"code": CODE, "cache": False}})
        while (m := ws.receive_json())["payload"].get("type") != "done":
            pass
    assert m["payload"]["status"] == "ok" and any(t.startswith("token:") for t in pool.tenants)
    with client.websocket_connect("/api/v1/ws?token=invented") as ws:
        assert ws.receive_json()["payload"]["status"] == 401


# --- /metrics: off the public port by default ---------------------------------------


def test_metrics_are_off_the_public_port_by_default(make_client: Make) -> None:
    default = Settings.model_fields["metrics_public"].get_default()
    assert default is False
    client, _ = make_client(metrics_public=default)
    r = client.get("/metrics")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    client, _ = make_client(metrics_public=True)  # an operator who wants it there
    assert "jaxplay_runs_in_flight" in client.get("/metrics").text
