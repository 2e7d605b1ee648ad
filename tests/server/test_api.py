"""The REST API against the fake pool: answers, errors, admission, snippets, meta."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from sandbox.pool.fake import FakePool as BaseFakePool

from .fakes import FakePool

CODE = "def f(x):\n    return x\n"


def run_body(**extra: object) -> dict[str, object]:
    return {"code": CODE, "args": "(1.0,)", **extra}


def test_run_answers_json_when_done(client: TestClient) -> None:
    r = client.post("/api/v1/runs", json=run_body())
    assert r.status_code == 200
    events = r.json()["events"]
    assert next(e["type"] for e in events) == "accepted"
    assert events[-1]["type"] == "done" and events[-1]["status"] == "ok"
    assert [e["type"] for e in events].count("done") == 1


def test_run_streams_ndjson(client: TestClient) -> None:
    with client.stream(
        "POST", "/api/v1/runs", json=run_body(), headers={"Accept": "application/x-ndjson"}
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/x-ndjson")
        events = [json.loads(line) for line in r.iter_lines() if line]
    assert events[0]["type"] == "accepted" and events[-1]["type"] == "done"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"code": CODE, "transforms": [{"name": "gard"}]}, "transforms.0.name"),
        ({"code": CODE, "transforms": [{"name": "grad", "argnum": 0}]}, "transforms.0"),
        ({"code": CODE, "entry": "not an identifier"}, "entry"),
        ({"code": CODE, "config": {"jax_platforms": "cpu"}}, "config"),
        ({"code": CODE, "devices": 0}, "devices"),
        ({"code": CODE, "outputs": ["assembly"]}, "outputs.0"),
        ({"code": CODE, "timeout_s": -1}, "timeout_s"),
        ({"code": CODE, "surprise": 1}, "surprise"),
        ({}, "code"),
        ({"code": 5}, "code"),
    ],
)
def test_malformed_requests_get_422_naming_the_field(
    client: TestClient, body: dict, field: str
) -> None:
    r = client.post("/api/v1/runs", json=body)
    assert r.status_code == 422, r.text
    answer = r.json()
    assert answer["status"] == 422 and answer["field"] == field
    assert answer["message"].startswith(field + ":")


def test_not_json_at_all(client: TestClient) -> None:
    r = client.post("/api/v1/runs", content=b"{nope", headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["field"] == "body"
    r = client.post(
        "/api/v1/runs",
        content=b"code=1",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 422 and "Content-Type: application/json" in r.json()["message"]
    deep = b"[" * 50_000 + b"]" * 50_000
    r = client.post("/api/v1/runs", content=deep, headers={"Content-Type": "application/json"})
    assert r.status_code in (400, 422)


def test_oversized_code_and_body_get_413(client: TestClient) -> None:
    r = client.post("/api/v1/runs", json={"code": "#" * (64 * 1024 + 1)})
    assert r.status_code == 413 and r.json()["field"] == "code"
    assert client.post("/api/v1/runs", json={"code": "#" * (64 * 1024)}).status_code == 200
    r = client.post(
        "/api/v1/runs", content=b" " * (600 * 1024), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413 and r.json()["error"] == "too_large"
    r = client.post("/api/v1/snippets", json={"code": "é" * (33 * 1024)})  # 66 KiB of UTF-8
    assert r.status_code == 413


def test_unknown_route_and_method_use_the_error_shape(client: TestClient) -> None:
    r = client.get("/api/v1/nothing")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    r = client.get("/api/v1/runs")
    assert r.status_code == 405 and r.json()["status"] == 405


def test_timeout_is_capped_by_the_server(
    make_client: Callable[..., tuple[TestClient, FakePool]],
) -> None:
    client, pool = make_client(max_timeout_s=5)
    assert client.post("/api/v1/runs", json=run_body(timeout_s=500)).status_code == 200
    assert pool.requests[-1].timeout_s == 5


# --- admission ----------------------------------------------------------------------


def test_rate_limit_answers_429_with_retry_after(
    make_client: Callable[..., tuple[TestClient, FakePool]],
) -> None:
    client, _ = make_client(rate_limit_per_minute=6, rate_limit_burst=2)
    statuses = [
        client.post("/api/v1/runs", json=run_body(cache=False)).status_code for _ in range(3)
    ]
    assert statuses == [200, 200, 429]
    r = client.post("/api/v1/runs", json=run_body())
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    assert r.json()["error"] == "rate_limited"


def test_known_tokens_get_their_own_rate_bucket(
    make_client: Callable[..., tuple[TestClient, FakePool]],
) -> None:
    client, pool = make_client(rate_limit_per_minute=6, rate_limit_burst=1, api_tokens=["alpha"])
    assert client.post("/api/v1/runs", json=run_body(cache=False)).status_code == 200
    assert client.post("/api/v1/runs", json=run_body(cache=False)).status_code == 429
    bearer = {"Authorization": "Bearer alpha"}
    assert (
        client.post("/api/v1/runs", json=run_body(cache=False), headers=bearer).status_code == 200
    )
    # A token the server did not issue names no tenant: refused, whatever its rate.
    r = client.post("/api/v1/runs", json=run_body(cache=False), headers={"X-API-Token": "minted"})
    assert r.status_code == 401 and r.json()["error"] == "invalid_token"
    assert pool.tenants[0].startswith("addr:") and pool.tenants[1].startswith("token:")


def wait_until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.005)


def _in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    return thread, out


def test_full_pool_queues_then_503(make_client: Callable[..., tuple[TestClient, FakePool]]) -> None:
    client, pool = make_client(FakePool(max_concurrent=1), max_queue=1, queue_timeout_s=60)
    held = run_body(code=CODE + "# fake: held\n", cache=False)  # runs until released
    first, out1 = _in_thread(lambda: client.post("/api/v1/runs", json=held))
    wait_until(lambda: pool.held == 1, 30)
    second, out2 = _in_thread(lambda: client.post("/api/v1/runs", json=held))
    wait_until(lambda: client.app.state.services.admission.queue_length() >= 1, 30)  # type: ignore[attr-defined]
    third = client.post("/api/v1/runs", json=held)
    assert third.status_code == 503 and "Retry-After" in third.headers
    assert third.json()["error"] == "server_busy"
    pool.release()
    first.join()
    second.join()
    assert out1[0].status_code == 200 and out2[0].status_code == 200  # type: ignore[attr-defined]
    assert out2[0].json()["events"][-1]["status"] == "ok"  # type: ignore[attr-defined]


def test_queue_wait_runs_out_with_503(
    make_client: Callable[..., tuple[TestClient, FakePool]],
) -> None:
    client, pool = make_client(FakePool(max_concurrent=1), max_queue=4, queue_timeout_s=0.1)
    held = run_body(code=CODE + "# fake: held\n", cache=False)  # runs until released
    first, _out = _in_thread(lambda: client.post("/api/v1/runs", json=held))
    wait_until(lambda: pool.held == 1, 30)
    r = client.post("/api/v1/runs", json=run_body(cache=False))
    assert r.status_code == 503 and "within 0.1 s" in r.json()["message"]
    pool.release()
    first.join()


def test_tenant_limit_answers_429(make_client: Callable[..., tuple[TestClient, FakePool]]) -> None:
    client, pool = make_client(max_runs_per_tenant=1, api_tokens=["t"])
    held = run_body(code=CODE + "# fake: held\n", cache=False)  # runs until released
    first, _ = _in_thread(lambda: client.post("/api/v1/runs", json=held))
    wait_until(lambda: pool.held == 1, 30)
    r = client.post("/api/v1/runs", json=held)
    assert r.status_code == 429 and r.json()["error"] == "too_many_runs"
    # Another tenant (a token) is not affected.
    other = client.post("/api/v1/runs", json=run_body(cache=False), headers={"X-API-Token": "t"})
    assert other.status_code == 200
    pool.release()
    first.join()


# --- a pool that misbehaves -----------------------------------------------------------


def test_a_stream_without_done_still_ends_with_done(client: TestClient) -> None:
    events = client.post("/api/v1/runs", json=run_body(code=CODE + "# fake: nodone\n")).json()[
        "events"
    ]
    assert events[-1]["type"] == "done" and events[-1]["status"] == "error"


def test_a_pools_events_are_validated_by_the_server(
    make_client: Callable[..., tuple[TestClient, FakePool]],
) -> None:
    # A pool of another module (here the fake) yields plain dicts: the run service
    # validates each (only what this process's own validation made passes as it is).
    script = [
        {"type": "jaxpr", "text": 42, "sources": []},  # not a string
        {"type": "launch"},  # no such event
        {"type": "value", "repr": "1", "tree": [], "extra": "undeclared"},
    ]
    client, _ = make_client(BaseFakePool(max_concurrent=1, script=script))
    events = client.post("/api/v1/runs", json=run_body(cache=False)).json()["events"]
    assert [e["type"] for e in events] == ["accepted", "value", "done"]
    assert "extra" not in events[1] and events[-1]["status"] == "ok"
    assert "jaxplay_refused_events_total 2.0" in client.get("/metrics").text


def test_a_pool_that_ignores_its_wall_clock_is_ended_by_the_server(
    make_client: Callable[..., tuple[TestClient, FakePool]],
) -> None:
    client, pool = make_client(run_grace_s=0.2, cancel_grace_s=0.2)
    body = run_body(code=CODE + "# fake: hang\n# fake: ignore-cancel\n", timeout_s=0.3)
    events = client.post("/api/v1/runs", json=body).json()["events"]
    assert events[-1]["status"] == "killed" and "gave no result" in events[-1]["reason"]
    assert pool.total - pool.finished == 0  # the pool saw the run end


@pytest.mark.slow
def test_a_sandbox_slow_to_start_does_not_eat_the_runs_own_time(
    make_client: Callable[..., tuple[TestClient, FakePool]],
) -> None:
    # The run's clock starts when the worker accepts it: a sandbox that takes longer to
    # start than the run's whole allowance (a zygote warming up on a busy machine) is
    # waited for, within the queue's bound; one that never starts is ended, saying so.
    client, _ = make_client(run_grace_s=0.2, cancel_grace_s=0.2, queue_timeout_s=2.0)
    slow = run_body(code=CODE + "# fake: start=0.8\n", timeout_s=0.3, cache=False)
    events = client.post("/api/v1/runs", json=slow).json()["events"]
    assert events[-1]["status"] == "ok", events[-1]
    never = run_body(code=CODE + "# fake: start=30\n# fake: ignore-cancel\n", timeout_s=0.3)
    events = client.post("/api/v1/runs", json=never).json()["events"]
    assert events[-1]["status"] == "killed"
    assert "no sandbox started the run within 2 s" in events[-1]["reason"]


# --- snippets ---------------------------------------------------------------------------


def test_snippets_are_content_addressed(client: TestClient) -> None:
    a = client.post("/api/v1/snippets", json={"code": CODE})
    assert a.status_code == 201
    sid = a.json()["id"]
    assert len(sid) == 8 and a.json()["url"].endswith(f"/s/{sid}")
    # The same content, spelled differently (defaults given, keys reordered): the same id.
    same = client.post("/api/v1/snippets", json={"entry": "f", "code": CODE, "transforms": []})
    assert same.json()["id"] == sid
    other = client.post("/api/v1/snippets", json={"code": CODE + "\n"})
    assert other.json()["id"] != sid
    stored = client.get(f"/api/v1/snippets/{sid}")
    assert stored.status_code == 200 and stored.json()["code"] == CODE
    assert "immutable" in stored.headers["cache-control"]
    assert client.get("/api/v1/snippets/aaaaaaaa").status_code == 404
    assert client.get("/api/v1/snippets/not-an-id!").status_code == 404


def test_shared_page_embeds_the_snippet_safely(client: TestClient) -> None:
    code = "def f(x):\n    return x  # </script><script>alert(1)</script>\n"
    sid = client.post("/api/v1/snippets", json={"code": code}).json()["id"]
    page = client.get(f"/s/{sid}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="jaxplay-snippet"' in page.text
    assert "<script>alert(1)" not in page.text
    assert client.get("/s/aaaaaaaa").status_code == 404
    assert client.get("/").status_code == 200


def test_frontend_dist_is_served_when_built(
    make_client: Callable[..., tuple[TestClient, FakePool]], tmp_path: object
) -> None:
    from pathlib import Path

    dist = Path(str(tmp_path)) / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<html><head></head><body>built</body></html>")
    (dist / "assets" / "app.js").write_text("console.log(1)")
    client, _ = make_client(frontend_dist=dist)
    assert "built" in client.get("/").text
    assert client.get("/assets/app.js").text == "console.log(1)"
    sid = client.post("/api/v1/snippets", json={"code": CODE}).json()["id"]
    page = client.get(f"/s/{sid}").text
    assert "built" in page and page.index('id="jaxplay-snippet"') < page.index("</head>")
    assert client.get("/api/v1/nothing").status_code == 404


# --- meta ---------------------------------------------------------------------------


def test_backends_health_metrics(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    # Other tests of this process may import JAX to compute what JAX says; the server
    # process never does (tests/test_layering.py starts one to prove it): here, that
    # /healthz reports it from the process's modules.
    for name in [m for m in sys.modules if m == "jax" or m.startswith("jax.")]:
        monkeypatch.delitem(sys.modules, name)
    assert client.get("/healthz").json()["jax_imported"] is False
    before = client.get("/api/v1/backends").json()["backends"]
    assert before[0]["name"] == "auto" and before[0]["queue_length"] == 0
    client.post("/api/v1/runs", json=run_body())
    after = client.get("/api/v1/backends").json()["backends"]
    assert after[0]["name"] == "cpu" and after[0]["jax_version"] == "0.0.fake"
    text = client.get("/metrics").text
    for name in (
        'jaxplay_runs_total{cached="false",status="ok"}',
        "jaxplay_queue_length",
        "jaxplay_stage_seconds_bucket",
        'jaxplay_pool{figure="capacity"}',
        "jaxplay_server_imports_jax 0.0",
        'jaxplay_http_requests_total{method="POST",route="/api/v1/runs",status="200"}',
    ):
        assert name in text, name


def test_openapi_lists_the_routes(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert {
        "/api/v1/runs",
        "/api/v1/snippets",
        "/api/v1/snippets/{snippet_id}",
        "/s/{snippet_id}",
        "/api/v1/backends",
        "/healthz",
        "/metrics",
    } <= set(spec["paths"])
    run = spec["paths"]["/api/v1/runs"]["post"]
    assert {"200", "413", "422", "429", "503"} <= set(run["responses"])
    assert "application/x-ndjson" in run["responses"]["200"]["content"]
    assert "cache" in spec["components"]["schemas"]["RunBody"]["properties"]
    assert client.get("/docs").status_code == 200
