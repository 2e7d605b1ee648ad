"""``GET /api/v1/stats`` and ``/stats`` against runs made here: a live server on the real
pool, runs from two clients (a token and an address), some answered by the cache; the
figures match what the clients saw, and neither the figures, the page nor the stored rows
carry anyone's code or identity."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.app.relay.figures import figures, percentile
from backend.app.storage.base import RunRow
from tests.support.live_server import LiveServer

pytestmark = pytest.mark.slow

TOKEN = "stats-tenant-0123456789abcdef"
MARKER = "secret_marker_7f3a"


def body(i: int) -> dict[str, Any]:
    code = f"def f(x):\n    {MARKER} = {i}\n    return jnp.sin(x) * {i}\n"
    return {"code": code, "args": "(jnp.ones((2,)),)", "outputs": ["jaxpr", "value"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("stats") / "jaxplay.sqlite3"
    env = {
        "JAXPLAY_PROBE_ON_START": "false",
        "JAXPLAY_API_TOKENS": f'["{TOKEN}"]',
        "JAXPLAY_CACHE_JOIN_WAIT_S": "120",
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
        "JAXPLAY_STATS_CACHE_S": "0",  # each figure below is read right after its runs
    }
    live = LiveServer(db, "--pool", "subprocess", "--unsafe-no-jail", env=env).start()
    yield live
    live.stop()


def run(
    server: LiveServer, request: dict[str, Any], **headers: str
) -> tuple[dict[str, Any], float]:
    t = time.perf_counter()
    r = httpx.post(server.url + "/api/v1/runs", json=request, headers=headers, timeout=120)
    wall_ms = (time.perf_counter() - t) * 1000
    assert r.status_code == 200, r.text
    events = r.json()["events"]
    return events[-1], wall_ms


def test_the_figures_are_the_runs_made(server: LiveServer) -> None:
    before = httpx.get(server.url + "/api/v1/stats").json()
    assert before["day"]["runs"] == 0 and before["hour"]["cache_hit_rate"] is None
    walls: list[float] = []
    cached = 0
    for i in range(3):  # three fresh runs by the address
        done, wall = run(server, body(i))
        walls.append(wall)
        cached += bool(done.get("cached"))
    # body(0) shared: its pristine run confirms it, so the token's run of it is a hit
    httpx.post(server.url + "/api/v1/snippets", json=body(0), timeout=60).raise_for_status()
    for _ in range(2):
        done, wall = run(server, body(0), authorization=f"Bearer {TOKEN}")
        walls.append(wall)
        cached += bool(done.get("cached"))
    assert cached >= 1, "a shared, confirmed answer is served from the cache"
    jax_version = run(server, body(9))[0]  # one more, to read the worker's version
    walls.append(0.0)
    stats = httpx.get(server.url + "/api/v1/stats").json()
    for window in ("hour", "day"):
        w = stats[window]
        assert w["runs"] == 6 and w["cache_hits"] == cached
        assert w["cache_hit_rate"] == round(cached / 6, 4)
        latency = w["first_output_ms"]
        assert latency["count"] == 6  # every run made a jaxpr
        assert 0 < latency["p50"] <= latency["p95"] <= max(walls)
    (version,) = stats["day"]["per_version"]
    assert stats["day"]["per_version"][version]["runs"] == 6 and jax_version["status"] == "ok"
    assert sum(bar["runs"] for bar in stats["day_by_hour"]) == 6
    assert stats["day_by_hour"][-1]["runs"] == 6 and len(stats["day_by_hour"]) == 24


def test_no_code_or_identity_leaks(server: LiveServer) -> None:
    run(server, body(42), authorization=f"Bearer {TOKEN}")
    for path in ("/api/v1/stats", "/stats"):
        text = httpx.get(server.url + path).text
        for secret in (MARKER, "jnp.sin", TOKEN, "token:", "127.0.0.1", "addr:", "session"):
            assert secret not in text, (path, secret)
    # What is stored for them is the five figures, nothing else.
    db = sqlite3.connect(server.database)
    columns = [row[1] for row in db.execute("PRAGMA table_info(run_stats)")]
    assert columns == ["at", "jax_version", "cached", "status", "first_ir_ms"]
    for row in db.execute("SELECT * FROM run_stats"):
        assert not any(isinstance(v, str) and MARKER in v for v in row)


def test_the_page_is_the_same_figures(server: LiveServer) -> None:
    stats = httpx.get(server.url + "/api/v1/stats").json()
    r = httpx.get(server.url + "/stats")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert "<script" not in r.text and 'data-testid="stats-plot"' in r.text
    assert f"<td>{stats['day']['runs']}</td>" in r.text


def test_figures_are_made_once_per_cache_period(tmp_path: Path) -> None:
    """A client asking in a loop gets the same figures (one query) until they are
    ``JAXPLAY_STATS_CACHE_S`` old."""
    env = {"JAXPLAY_PROBE_ON_START": "false", "JAXPLAY_STATS_CACHE_S": "3600"}
    live = LiveServer(tmp_path / "c.sqlite3", "--pool", "tests.server.fakes:FakePool",
                      "--unsafe-no-jail", env=env).start()  # fmt: skip
    try:
        first = httpx.get(live.url + "/api/v1/stats").json()
        r = httpx.post(live.url + "/api/v1/runs", json={"code": "def f():\n    return 1\n"})
        assert r.status_code == 200
        again = httpx.get(live.url + "/api/v1/stats").json()
        assert again == first and again["day"]["runs"] == 0
    finally:
        live.stop()


def test_off_means_404(tmp_path: Path) -> None:
    env = {"JAXPLAY_PROBE_ON_START": "false", "JAXPLAY_PUBLIC_STATS": "false"}
    live = LiveServer(tmp_path / "off.sqlite3", "--pool", "tests.server.fakes:FakePool",
                      "--unsafe-no-jail", env=env).start()  # fmt: skip
    try:
        assert httpx.get(live.url + "/api/v1/stats").status_code == 404
        assert httpx.get(live.url + "/stats").status_code == 404
    finally:
        live.stop()


def test_percentiles_and_windows() -> None:
    assert percentile([], 0.5) is None
    assert percentile([5.0], 0.95) == 5.0
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0 and percentile(values, 0.95) == 95.0
    now = 1_000_000.0
    rows = [
        RunRow(now - 10, "0.4.38", True, "ok", 12.0),
        RunRow(now - 1800, "0.12.0.1", False, "ok", 900.0),
        RunRow(now - 7200, "0.12.0.1", False, "error", None),  # in the day, not the hour
    ]
    f = figures(rows, now)
    assert f["hour"]["runs"] == 2 and f["day"]["runs"] == 3
    assert f["hour"]["per_version"]["0.4.38"]["cache_hit_rate"] == 1.0
    assert f["day"]["per_version"]["0.12.0.1"]["first_output_ms"]["count"] == 1
    assert [b["runs"] for b in f["day_by_hour"]][-3:] == [0, 1, 2]  # 2 h ago starts bar 22
