"""The WebSocket against the fake pool: envelope, handshake, runs, cancel, timeouts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from backend.app.core.wire import SERVER_MESSAGE
from sandbox.pool.zygote_pool import tenant_group
from sandbox.protocol.tenants import is_single_use

from .fakes import FakePool

CODE = "def f(x):\n    return x\n"
Make = Callable[..., tuple[TestClient, FakePool]]


def receive(ws: Any) -> dict[str, Any]:
    message = ws.receive_json()
    SERVER_MESSAGE.validate_python(message)  # the client end validates the envelope too
    return message


def until_done(ws: Any, seq: int) -> list[dict[str, Any]]:
    """Messages up to run ``seq``'s done event (or its error)."""
    seen = []
    while True:
        message = receive(ws)
        seen.append(message)
        if message["seq"] == seq and (
            message["type"] == "error" or message["payload"].get("type") == "done"
        ):
            return seen


def test_hello_then_a_run(client: TestClient) -> None:
    with client.websocket_connect("/api/v1/ws") as ws:
        hello = receive(ws)
        assert hello["type"] == "hello" and hello["seq"] == -1
        assert hello["payload"]["version"] == 1 and "idle_s" in hello["payload"]["timeouts"]
        ws.send_json({"type": "hello", "seq": 0, "payload": {"version": 1}})
        ws.send_json({"type": "run", "seq": 1, "payload": {"code": CODE}})
        messages = until_done(ws, 1)
    assert all(m["type"] == "event" and m["seq"] == 1 for m in messages)
    kinds = [m["payload"]["type"] for m in messages]
    assert kinds[0] == "accepted" and kinds[-1] == "done" and "jaxpr" in kinds


def test_a_new_run_cancels_the_previous_one(make_client: Make) -> None:
    client, pool = make_client()
    with client.websocket_connect("/api/v1/ws") as ws:
        receive(ws)
        ws.send_json(
            {"type": "run", "seq": 1, "payload": {"code": CODE + "# fake: hang\n", "cache": False}}
        )
        assert receive(ws)["payload"]["type"] == "accepted"
        ws.send_json({"type": "run", "seq": 2, "payload": {"code": CODE, "cache": False}})
        messages = until_done(ws, 2)
    first = [m["payload"] for m in messages if m["seq"] == 1]
    assert first[-1]["type"] == "done" and first[-1]["status"] == "cancelled"
    # Run 1 ended before run 2 started: one worker at a time per connection.
    assert messages.index(next(m for m in messages if m["seq"] == 2)) > messages.index(
        next(m for m in messages if m["seq"] == 1 and m["payload"]["type"] == "done")
    )
    assert messages[-1]["payload"]["status"] == "ok"
    # No session cookie (not the page): the tenant is the client's address, and no
    # process is kept for an address (issue 33): each run is a single-use tenant of
    # that address's group, a name no other run has
    assert len(set(pool.tenants)) == len(pool.tenants) == 2
    assert {tenant_group(t) for t in pool.tenants} == {tenant_group(pool.tenants[0])}
    assert pool.tenants[0].startswith("addr:")
    assert all(is_single_use(t) for t in pool.tenants)


def test_cancel(client: TestClient) -> None:
    with client.websocket_connect("/api/v1/ws") as ws:
        receive(ws)
        ws.send_json({"type": "run", "seq": 7, "payload": {"code": CODE + "# fake: hang\n"}})
        assert receive(ws)["payload"]["type"] == "accepted"
        ws.send_json({"type": "cancel", "seq": 7})
        done = until_done(ws, 7)[-1]["payload"]
    assert done["status"] == "cancelled"


def test_a_cancel_the_pool_ignores_ends_the_run_after_the_cancel_grace(make_client: Make) -> None:
    # The relay waiting for the pool's next event is woken by the cancel: the run ends
    # cancel_grace_s after it, not at the run's own timeout_s (60 s here).
    client, _ = make_client(cancel_grace_s=0.2)
    code = CODE + "# fake: slow=30\n# fake: ignore-cancel\n"
    with client.websocket_connect("/api/v1/ws") as ws:
        receive(ws)
        ws.send_json({"type": "run", "seq": 3, "payload": {"code": code, "timeout_s": 60}})
        assert receive(ws)["payload"]["type"] == "accepted"
        started = time.monotonic()
        ws.send_json({"type": "cancel", "seq": 3})
        done = until_done(ws, 3)[-1]["payload"]
    assert done["status"] == "cancelled" and done["reason"] == "cancelled by the client"
    assert 0.2 <= time.monotonic() - started < 10


def test_bad_messages_get_an_error_with_their_seq(client: TestClient) -> None:
    with client.websocket_connect("/api/v1/ws") as ws:
        receive(ws)
        ws.send_text("not json")
        error = receive(ws)
        assert error["type"] == "error" and error["seq"] == -1
        ws.send_json({"type": "launch", "seq": 3})
        assert receive(ws)["type"] == "error"
        ws.send_json(
            {"type": "run", "seq": 4, "payload": {"code": CODE, "transforms": [{"name": "gard"}]}}
        )
        error = receive(ws)
        assert error["seq"] == 4 and error["payload"]["status"] == 422
        assert error["payload"]["field"] == "transforms.0.name"
        ws.send_json({"type": "run", "seq": 5, "payload": {"code": "#" * (64 * 1024 + 1)}})
        error = receive(ws)
        assert error["seq"] == 5 and error["payload"]["status"] == 413
        # The connection still works.
        ws.send_json({"type": "run", "seq": 6, "payload": {"code": CODE}})
        assert until_done(ws, 6)[-1]["payload"]["status"] == "ok"


def test_refused_runs_get_an_error_with_the_http_status(make_client: Make) -> None:
    client, _ = make_client(FakePool(max_concurrent=1), max_queue=0)
    with (
        client.websocket_connect("/api/v1/ws") as one,
        client.websocket_connect("/api/v1/ws") as two,
    ):
        receive(one), receive(two)
        one.send_json({"type": "run", "seq": 1, "payload": {"code": CODE + "# fake: hang\n"}})
        assert receive(one)["payload"]["type"] == "accepted"
        two.send_json({"type": "run", "seq": 1, "payload": {"code": CODE, "cache": False}})
        error = receive(two)
        assert error["type"] == "error" and error["payload"]["status"] == 503
        assert error["payload"]["retry_after_s"] >= 1


def test_message_too_big_closes_1009(make_client: Make) -> None:
    client, _ = make_client(max_body_bytes=4096)
    with client.websocket_connect("/api/v1/ws") as ws:
        receive(ws)
        ws.send_text("x" * 5000)
        assert receive(ws)["payload"]["status"] == 413
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 1009


def test_wrong_version_closes_1008(client: TestClient) -> None:
    with client.websocket_connect("/api/v1/ws") as ws:
        receive(ws)
        ws.send_json({"type": "hello", "seq": 0, "payload": {"version": 99}})
        assert receive(ws)["type"] == "error"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 1008


@pytest.mark.parametrize(
    ("settings", "first", "reason"),
    [
        ({"handshake_timeout_s": 0.2}, None, "no message within"),
        ({"idle_timeout_s": 0.2}, {"type": "hello", "seq": 0}, "idle timeout"),
        (
            {"session_timeout_s": 0.3},
            {"type": "run", "seq": 1, "payload": {"code": CODE + "# fake: hang\n"}},
            "session timeout",
        ),
    ],
)
def test_named_timeouts_close_the_connection(
    make_client: Make, settings: dict[str, float], first: dict[str, Any] | None, reason: str
) -> None:
    client, pool = make_client(**settings)
    with client.websocket_connect("/api/v1/ws") as ws:
        receive(ws)
        if first is not None:
            ws.send_json(first)
        with pytest.raises(WebSocketDisconnect) as closed:
            while True:
                ws.receive_json()
    assert closed.value.code == 1001 and reason in closed.value.reason
    assert pool.total == pool.finished  # a run in flight was ended with the connection


def test_closing_mid_run_ends_the_run(make_client: Make) -> None:
    client, pool = make_client()
    with client.websocket_connect("/api/v1/ws") as ws:
        receive(ws)
        ws.send_json({"type": "run", "seq": 1, "payload": {"code": CODE + "# fake: hang\n"}})
        assert receive(ws)["payload"]["type"] == "accepted"
    client.get("/healthz")  # let the server notice
    import time

    deadline = time.monotonic() + 3
    while pool.total != pool.finished and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.total == pool.finished == 1


def test_a_link_s_code_as_stored_runs_single_use_and_an_edit_is_the_session_s(
    make_client: Make,
) -> None:
    """Issue 33: on a socket its page opened from a link (``?link=ID``), a run of that
    snippet's code as the server stored it goes to a single-use tenant; the person's
    edit, or a link the server does not know, runs as their session."""
    client, pool = make_client()
    link_code = CODE + "# the author's\n"
    made = client.post("/api/v1/snippets", json={"code": link_code})
    assert made.status_code == 201, made.text
    link = made.json()["id"]
    client.get("/")  # the page's session cookie, sent back by the socket
    runs = {
        (link, link_code + "\n  \n"): True,  # as stored, but for trailing blanks
        (link, CODE + "# mine\n"): False,  # edited: the person's own
        ("abcdefgh234", link_code): False,  # no such snippet
        (None, link_code): False,  # a page that is no link's
    }
    for (name, code), single in runs.items():
        url = "/api/v1/ws" + (f"?link={name}" if name else "")
        with client.websocket_connect(url) as ws:
            receive(ws)
            ws.send_json({"type": "run", "seq": 1, "payload": {"code": code, "cache": False}})
            assert until_done(ws, 1)[-1]["payload"]["status"] == "ok"
        tenant = pool.tenants[-1]
        assert "|session:" in tenant and is_single_use(tenant) is single, (name, code, tenant)
