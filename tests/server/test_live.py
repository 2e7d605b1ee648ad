"""A real server (``python -m backend.cli.serve``) with the real pool: runs over
HTTP and the WebSocket, streaming, faults (a worker SIGKILLed mid-run, a server
stopped and restarted), memory, and no JAX in the server."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from backend.app.core.wire import SERVER_MESSAGE
from backend.cli.client.rest import ServerError, stream_run
from tests.support.live_server import LiveServer, pristine_confirmed, wait_for_pristine_confirmed

pytestmark = pytest.mark.slow

GRAD = {
    "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.tanh(x) ** 2)\n",
    "args": "(jnp.ones((3,)),)",
    "transforms": [{"name": "grad"}],
    "outputs": ["jaxpr", "value"],
}
SLEEPY = "import time\ntime.sleep({s})\n\ndef f():\n    return 1.0\n"
SPIN = "while True:\n    pass\n\ndef f():\n    return 1.0\n"
#: A run that names its process (PR_SET_NAME), so that the test kills that process:
#: which new process under the server is the run's, the depth cannot tell (a spare
#: forked meanwhile from a jail template is as deep; a warm child is not new)
VICTIM = (
    "import ctypes, time\n"
    "ctypes.CDLL(None).prctl(15, b'jaxplay-victim', 0, 0, 0)\n"
    "time.sleep({s})\n\ndef f():\n    return 1.0\n"
)


def _jail_available() -> bool:
    return importlib.util.find_spec("sandbox.pool.zygote_pool") is not None and bool(
        shutil.which("bwrap")
    )


@pytest.fixture(
    scope="module",
    params=[
        "subprocess",
        pytest.param(
            "zygote",
            marks=pytest.mark.skipif(
                not _jail_available(), reason="the jailed pool needs bubblewrap"
            ),
        ),
    ],
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A real server on the real pool: unjailed processes, and the jailed warm pool."""
    db = tmp_path_factory.mktemp("live") / "jaxplay.sqlite3"
    args = ["--pool", request.param] + (
        ["--unsafe-no-jail"] if request.param == "subprocess" else []
    )
    env = {
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
        "JAXPLAY_POOL_CAPACITY": "2",
        "JAXPLAY_API_TOKENS": '["live-tenant-b-0123456789"]',
        # a request waits for the pristine run it asks for: generously, on a busy machine
        "JAXPLAY_CACHE_JOIN_WAIT_S": "120",
        "JAXPLAY_QUEUE_TIMEOUT_S": "120",
    }
    live = LiveServer(db, *args, env=env).start()
    yield live
    live.stop()


def post(server: LiveServer, body: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    r = httpx.post(server.url + "/api/v1/runs", json=body, timeout=60, **kw)
    assert r.status_code == 200, r.text
    return r.json()["events"]


def test_a_real_run_then_the_cache(server: LiveServer) -> None:
    events = post(server, GRAD)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "accepted" and kinds[-1] == "done" and events[-1]["status"] == "ok", events[
        -1
    ]
    jaxpr = next(e for e in events if e["type"] == "jaxpr")
    assert "tanh" in jaxpr["text"] and jaxpr["sources"]
    assert events[0]["worker"]["jax_version"]
    # Its author's own re-run is a run (no evidence of its own; nothing confirmed yet).
    assert "cached" not in post(server, GRAD)[0]
    # Another tenant asks: its request asks for the server's pristine run and runs at
    # once; the pristine run agrees, and that tenant is answered from the cache.
    b = {"Authorization": "Bearer live-tenant-b-0123456789"}
    confirmed = pristine_confirmed(server)
    assert "cached" not in post(server, GRAD, headers=b)[0]
    wait_for_pristine_confirmed(server, confirmed + 1)
    other = post(server, GRAD, headers=b)
    assert other[0]["cached"] is True  # (how fast a cached answer comes: benchmarks/)
    assert next(e for e in other if e["type"] == "jaxpr")["text"] == jaxpr["text"]
    assert post(server, GRAD)[0]["cached"] is True
    backends = httpx.get(server.url + "/api/v1/backends").json()["backends"]
    assert (
        backends[0]["backend"] == "cpu"
        and backends[0]["jax_version"] == events[0]["worker"]["jax_version"]
    )


def test_ndjson_events_arrive_as_they_happen(server: LiveServer) -> None:
    arrivals: list[tuple[float, dict[str, Any]]] = []
    body = {"code": SLEEPY.format(s=1.0), "outputs": ["jaxpr"]}
    with httpx.stream(
        "POST",
        server.url + "/api/v1/runs",
        json=body,
        headers={"Accept": "application/x-ndjson"},
        timeout=60,
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line:
                arrivals.append((time.monotonic(), json.loads(line)))
    first, last = arrivals[0], arrivals[-1]
    assert (
        first[1]["type"] == "accepted" and last[1]["type"] == "done" and last[1]["status"] == "ok"
    )
    assert last[0] - first[0] > 0.7  # accepted came out before the code's sleep ended


def test_the_python_client(server: LiveServer) -> None:
    events = list(stream_run(server.url, GRAD))
    assert events[-1]["status"] == "ok"
    with pytest.raises(ServerError) as error:
        list(stream_run(server.url, {"code": "x", "transforms": [{"name": "gard"}]}))
    assert error.value.status == 422 and error.value.field == "transforms.0.name"
    # the request is sent as it was given: what is wrong with it is the server's to say
    with pytest.raises(ServerError) as error:
        list(stream_run(server.url, {"code": "x", "timeout_s": "soon"}))
    assert error.value.status == 422 and error.value.field == "timeout_s"


class WS:
    """A WebSocket client that checks every envelope it gets."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def recv(self, timeout: float = 60) -> dict[str, Any]:
        message = json.loads(await asyncio.wait_for(self.conn.recv(), timeout))
        SERVER_MESSAGE.validate_python(message)
        return message

    async def send(self, message: dict[str, Any]) -> None:
        await self.conn.send(json.dumps(message))

    async def until_done(self, seq: int, timeout: float = 60) -> list[dict[str, Any]]:
        seen = []
        while True:
            m = await self.recv(timeout)
            seen.append(m)
            if m["seq"] == seq and (m["type"] == "error" or m["payload"]["type"] == "done"):
                return seen


def ws_url(server: LiveServer) -> str:
    return server.url.replace("http", "ws") + "/api/v1/ws"


def test_websocket_runs_replace_and_cancel(server: LiveServer) -> None:
    async def go() -> None:
        async with websockets.connect(ws_url(server)) as conn:
            ws = WS(conn)
            assert (await ws.recv())["type"] == "hello"
            await ws.send({"type": "run", "seq": 1, "payload": {"code": SPIN, "timeout_s": 30}})
            assert (await ws.recv())["payload"]["type"] == "accepted"
            await ws.send({"type": "run", "seq": 2, "payload": {**GRAD, "cache": False}})
            seen = await ws.until_done(2)
            done1 = next(
                m["payload"] for m in seen if m["seq"] == 1 and m["payload"]["type"] == "done"
            )
            assert done1["status"] == "cancelled"
            assert seen[-1]["payload"]["status"] == "ok"
            await ws.send({"type": "run", "seq": 3, "payload": {"code": SPIN, "timeout_s": 30}})
            assert (await ws.recv())["payload"]["type"] == "accepted"
            started = time.monotonic()
            await ws.send({"type": "cancel", "seq": 3})
            done3 = (await ws.until_done(3))[-1]["payload"]
            # ended by the cancel, long before its own 30 s wall clock
            assert done3["status"] == "cancelled" and time.monotonic() - started < 20

    asyncio.run(go())


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def test_a_worker_killed_mid_run(server: LiveServer) -> None:
    """SIGKILL the worker in the middle of a run: done (killed, saying so) long before
    the run's own 30 s, and the connection's next run works."""

    async def go() -> None:
        async with websockets.connect(ws_url(server)) as conn:
            ws = WS(conn)
            await ws.recv()
            await ws.send(
                {"type": "run", "seq": 1, "payload": {"code": VICTIM.format(s=30), "timeout_s": 40}}
            )
            assert (await ws.recv())["payload"]["type"] == "accepted"
            # The run's process (a fresh engine process, or the child forked from a
            # zygote inside its jail), by the name its code gave it
            deadline = time.monotonic() + 20
            while not (
                victims := [p for p in server.descendants() if _comm(p) == "jaxplay-victim"]
            ):
                assert time.monotonic() < deadline, server.descendants()
                await asyncio.sleep(0.05)
            (victim,) = victims
            os.kill(victim, signal.SIGKILL)
            killed_at = time.monotonic()
            done = (await ws.until_done(1, timeout=25))[-1]["payload"]
            elapsed = time.monotonic() - killed_at
            assert done["type"] == "done" and done["status"] == "killed", done
            assert "SIGKILL" in done["reason"]
            assert elapsed < 25, elapsed
            await ws.send({"type": "run", "seq": 2, "payload": {**GRAD, "cache": False}})
            assert (await ws.until_done(2))[-1]["payload"]["status"] == "ok"

    asyncio.run(go())


def test_the_wall_clock_through_the_server(server: LiveServer) -> None:
    started = time.monotonic()
    events = post(server, {"code": SPIN, "timeout_s": 2})
    assert events[-1]["status"] == "timeout" and "wall clock 2 s" in events[-1]["reason"]
    assert time.monotonic() - started < 20  # the request's 2 s ended it, not the limit's


def test_the_server_stays_small_and_never_imports_jax(server: LiveServer) -> None:
    assert httpx.get(server.url + "/healthz").json()["jax_imported"] is False
    maps = Path(f"/proc/{server.pid}/maps").read_text()
    assert "jaxlib" not in maps and "xla_extension" not in maps
    assert server.rss_bytes() < 120 * 1024 * 1024
    metrics = httpx.get(server.url + "/metrics").text
    assert 'jaxplay_stage_seconds_count{stage="trace"}' in metrics


def test_snippets_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "snippets.sqlite3"
    # 40 snippets in a few seconds: more than a client may create (not what this tests)
    env = {"JAXPLAY_PROBE_ON_START": "false", "JAXPLAY_SNIPPET_RATE_PER_MINUTE": "0"}
    args = ("--pool", "tests.server.fakes:FakePool", "--unsafe-no-jail")
    live = LiveServer(db, *args, env=env).start()
    made: dict[str, dict[str, Any]] = {}
    try:
        for stop in (signal.SIGTERM, signal.SIGKILL):
            for i in range(10):
                body = {"code": f"def f():\n    return {i}  # {stop.name}\n"}
                r = httpx.post(live.url + "/api/v1/snippets", json=body)
                assert r.status_code == 201
                made[r.json()["id"]] = body
            live.stop(stop)
            live = LiveServer(db, *args, env=env, port=live.port).start()
            for sid, body in made.items():
                r = httpx.get(f"{live.url}/api/v1/snippets/{sid}")
                assert r.status_code == 200 and r.json()["code"] == body["code"], (stop, sid)
                # The same content still gets the same id after the restart.
                assert httpx.post(live.url + "/api/v1/snippets", json=body).json()["id"] == sid
    finally:
        live.stop()
