"""API sessions (issue 47, ``POST /api/v1/sessions``), as an attacker would try them.

A script's session makes its runs one person's (a kept process, as a page session's
edits); it is the page's signed value, so it buys what the page's cookie buys and no
more. Tried here: forged, altered, expired and other servers' sessions sent back; a
session replayed from another address; one address minting sessions without end;
one address's many sessions against another address's runs; a foreign page asking.
On the fake pool (fast); the kept process itself, through the real jailed pool and
the CLI, is tests/cli/test_cli_session.py's.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from fastapi.testclient import TestClient

from backend.app.tenancy.identity import SESSION_COOKIE, SESSION_HEADER
from sandbox.pool.zygote_pool import tenant_group
from sandbox.protocol.tenants import is_single_use

from . import test_hostile_clients as hostile
from .test_hostile_clients import PEER, normal, run

serve = hostile.serve  # the hostile battery's server on the fake pool, one peer a header

ME = "198.51.100.7"


def issue(client: TestClient, peer: str = ME, **headers: str) -> Any:
    return client.post("/api/v1/sessions", headers={PEER: peer, **headers})


def session_of(client: TestClient, peer: str = ME) -> str:
    r = issue(client, peer)
    assert r.status_code == 201, r.text
    client.cookies.clear()  # the tests send it as they mean to, never by the jar
    value: str = r.json()["session"]
    return value


def test_a_script_s_session_makes_its_runs_one_person_s(serve: Any) -> None:
    client, pool = serve()
    r = issue(client)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["header"] == SESSION_HEADER and body["cookie"] == SESSION_COOKIE
    assert body["max_age_s"] == 30 * 24 * 3600
    assert abs(body["expires_at"] - (time.time() + body["max_age_s"])) < 60
    assert r.headers["cache-control"] == "no-store"
    cookie = r.headers["set-cookie"].lower()  # the page's cookie, for a client with a jar
    assert cookie.startswith(f"{SESSION_COOKIE}=") and "httponly" in cookie
    client.cookies.clear()
    session = body["session"]

    for _ in range(2):
        assert run(client, ME, **{SESSION_HEADER: session}).status_code == 200
    assert run(client, ME, Cookie=f"{SESSION_COOKIE}={session}").status_code == 200
    kept = pool.tenants[-3:]
    assert len(set(kept)) == 1, kept  # header or cookie: one tenant, its process kept
    assert kept[0].startswith(f"addr:{ME}|session:") and not is_single_use(kept[0])
    # Without it, the address's run is single-use, as before.
    assert run(client, ME).status_code == 200
    assert is_single_use(pool.tenants[-1]) and tenant_group(pool.tenants[-1]) == f"addr:{ME}"
    # A second session of the same address is another person: another tenant.
    other = session_of(client)
    assert run(client, ME, **{SESSION_HEADER: other}).status_code == 200
    assert pool.tenants[-1] not in kept and tenant_group(pool.tenants[-1]) == f"addr:{ME}"
    normal(client)


def test_forged_altered_expired_and_foreign_sessions_are_refused(serve: Any, tmp_path: Any) -> None:
    client, pool = serve(session_secret="one-secret-" + "x" * 20, session_max_age_s=1)
    good = session_of(client)
    other_server, _ = serve(session_secret="another-secret-" + "y" * 20)
    foreign = session_of(other_server)  # signed by another server's key
    before = pool.total
    for forged in (good[:-2] + ("AA" if not good.endswith("AA") else "BB"),
                   "made-up.value.sig", good.split(".")[0], "a" * 500, foreign, ""):  # fmt: skip
        r = run(client, ME, **{SESSION_HEADER: forged})
        assert r.status_code == 401, (forged, r.text)
        assert r.json()["error"] == "invalid_session" and r.json()["field"] == "session"
        assert "POST /api/v1/sessions" in r.json()["message"]
    time.sleep(2.1)  # older than session_max_age_s: expired
    r = run(client, ME, **{SESSION_HEADER: good})
    assert r.status_code == 401 and r.json()["error"] == "invalid_session", r.text
    assert pool.total == before  # not one ran, not one tenant made
    # On the WebSocket too (a page's socket sends the cookie; a script may send the header).
    with client.websocket_connect(
        "/api/v1/ws", headers={PEER: ME, SESSION_HEADER: "made-up.value.sig"}
    ) as ws:
        refused = ws.receive_json()
        assert refused["type"] == "error" and refused["payload"]["status"] == 401
    normal(client)


def test_a_session_replayed_from_another_address_is_another_tenant(serve: Any) -> None:
    """A stolen session buys no way into its holder's process from elsewhere: the
    tenant is the address's group and the session together."""
    client, pool = serve()
    session = session_of(client)
    assert run(client, ME, **{SESSION_HEADER: session}).status_code == 200
    victim = pool.tenants[-1]
    assert run(client, "203.0.113.66", **{SESSION_HEADER: session}).status_code == 200
    thief = pool.tenants[-1]
    assert thief != victim
    assert tenant_group(thief) == "addr:203.0.113.66" and tenant_group(victim) == f"addr:{ME}"
    assert thief.split("|", 1)[1] == victim.split("|", 1)[1]  # the same session, elsewhere
    normal(client)


def test_an_address_is_issued_a_few_sessions_then_told_to_wait(serve: Any) -> None:
    client, _pool = serve(session_issue_burst=3, session_issue_per_hour=2)
    issued = [session_of(client) for _ in range(3)]
    assert len(set(issued)) == 3
    r = issue(client)
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_many_sessions"
    assert 1700 <= float(r.headers["retry-after"]) <= 1800  # one more in half an hour
    # A claimed address from a peer that is no trusted proxy buys nothing.
    assert issue(client, ME, **{"X-Forwarded-For": "203.0.113.1"}).status_code == 429
    # Another address is not held to this one's.
    assert issue(client, "192.0.2.55").status_code == 201
    # The sessions issued still work; refusing more takes none of them back.
    assert run(client, ME, **{SESSION_HEADER: issued[0]}).status_code == 200
    metrics = client.get("/metrics", headers={PEER: ME}).text
    assert 'jaxplay_rejected_runs_total{reason="sessions"} 2.0' in metrics
    normal(client)


def test_one_address_s_many_sessions_leave_another_address_its_runs(serve: Any) -> None:
    """Sessions are tenants of their address's group: all of them together hold the
    address's ``max_runs_per_client`` runs, so another address still runs."""
    client, pool = serve(max_runs_per_client=2, max_runs_per_tenant=2, session_issue_burst=6)
    held = {"code": "def f(x):\n    return x\n# fake: held\n", "cache": False}
    sessions = [session_of(client) for _ in range(6)]
    statuses: list[int] = []

    def post(session: str) -> None:
        headers = {PEER: ME, SESSION_HEADER: session}
        statuses.append(client.post("/api/v1/runs", json=held, headers=headers).status_code)

    threads = [threading.Thread(target=post, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while not (pool.held == 2 and len(statuses) == 4):
        assert time.monotonic() < deadline, (pool.held, statuses)
        time.sleep(0.01)
    assert statuses == [429] * 4
    normal(client, "192.0.2.77")  # while the attacker's two runs are held
    pool.release()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200, 200, 429, 429, 429, 429]


def test_a_foreign_page_may_not_ask_for_a_session(serve: Any) -> None:
    client, _pool = serve()
    r = issue(client, ME, Origin="https://evil.example")
    assert r.status_code == 403 and r.json()["error"] == "forbidden_origin", r.text
    assert "set-cookie" not in r.headers
    own = issue(client, ME, Origin="http://testserver")  # the page's own origin
    assert own.status_code == 201, own.text
