"""DNS rebinding, tokens in URLs and the metrics page (issue 20, items 9 and 10).

A page on ``http://rebind.test`` whose name its owner points at 127.0.0.1 is, to the
browser, same-origin with a jaxplay on loopback; its requests still carry
``Host: rebind.test``. Without ``public_url`` the server answers only the hosts it is
configured for; with it, the request's ``Host`` is not the server's origin."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from backend.app.middleware import host_allowed
from backend.app.settings import Settings
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


def test_with_a_public_url_the_host_is_not_the_origin(make_client: Make) -> None:
    client, pool = make_client(public_url="https://jaxplay.example")
    # Behind a proxy the Host is whatever it forwards: not checked, not trusted.
    assert client.get("/healthz", headers={"Host": "rebind.test"}).status_code == 200
    with client.websocket_connect("/api/v1/ws", headers=REBIND) as ws:
        refused = ws.receive_json()
        assert refused["type"] == "error" and refused["payload"]["status"] == 403
    origin = {"Host": "rebind.test", "Origin": "https://jaxplay.example"}
    with client.websocket_connect("/api/v1/ws", headers=origin) as ws:
        assert ws.receive_json()["type"] == "hello"
    assert pool.total == 0


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
