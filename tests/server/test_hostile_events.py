"""The server-side hostile battery: user code that attacks the server through the
event pipe, and a client that stops reading, against a real ``jaxplay serve`` on
the jailed warm pool.

User code shares its process with the engine, so it can write event lines itself
(``os.write`` to the engine's event fd). Each case names its safe outcome and
checks it, then the server's memory (during the case and after), its health, and
that the next run is normal.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandbox.protocol import TAMPERED_REASON
from tests.support.live_server import LiveServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="the jailed pool needs bubblewrap"),
]

#: The issue's bound for the server process, during the floods and after.
MAX_RSS = 150 * 1024 * 1024
STALL_S = 4.0

#: What user code does to write event lines of its own. It tags them with the run's
#: token as the engine does (found in the engine's emitter: the token is a tell, not a
#: boundary), so that what the gate does past the token is what is tested here; any
#: line it refuses still makes the run ``tampered``.
FORGE = """
import json, os, sys
_FD = sys.stdout._emitter._fd
_TAG = sys.stdout._emitter._prefix
def forge(event):
    line = event if isinstance(event, bytes) else json.dumps(event).encode()
    os.write(_FD, _TAG + line + b"\\n")
"""
ENTRY = "\ndef f(x):\n    return x * 2.0\n"
NORMAL = {
    "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.tanh(x) ** 2)\n",
    "args": "(jnp.ones((3,)),)",
    "transforms": [{"name": "grad"}],
    "outputs": ["jaxpr", "value"],
}


class RssWatch:
    """The server's largest RSS while the block runs (sampled every 20 ms)."""

    def __init__(self, server: LiveServer) -> None:
        self.server, self.peak, self._stop = server, 0, threading.Event()

    def __enter__(self) -> RssWatch:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.server.rss_bytes())
            time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("hostile-events") / "jaxplay.sqlite3"
    env = {
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
        "JAXPLAY_CACHE_ENABLED": "false",
        "JAXPLAY_CLIENT_STALL_TIMEOUT_S": str(STALL_S),
        "JAXPLAY_MAX_RUNS_PER_TENANT": "4",
    }
    live = LiveServer(db, "--pool", "zygote", env=env).start()
    yield live
    live.stop()


def post(server: LiveServer, body: dict[str, Any]) -> list[dict[str, Any]]:
    r = httpx.post(server.url + "/api/v1/runs", json=body, timeout=60)
    assert r.status_code == 200, r.text
    events: list[dict[str, Any]] = r.json()["events"]
    assert events[-1]["type"] == "done" and sum(e["type"] == "done" for e in events) == 1
    return events


def forged_run(server: LiveServer, forging: str, **request: Any) -> list[dict[str, Any]]:
    body = {"code": FORGE + forging + ENTRY, "args": "(1.0,)", "outputs": ["jaxpr", "value"]}
    return post(server, {**body, **request})


def assert_server_well(server: LiveServer, peak: int) -> None:
    """Small during and after, healthy, and the next run is normal."""
    assert peak <= MAX_RSS, f"server RSS peaked at {peak / 2**20:.0f} MB"
    assert server.rss_bytes() <= MAX_RSS
    assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200
    events = post(server, NORMAL)
    done = events[-1]
    assert done["status"] == "ok" and "dropped" not in done, done
    assert [e["type"] for e in events if e["type"] in ("jaxpr", "value")] == ["jaxpr", "value"]


WORKER = {"backend": "cpu", "platform": "cpu", "device_kind": "evil", "devices": 1,
          "jax_version": "6.6.6", "jaxlib_version": "6.6.6"}  # fmt: skip
FORGED = [
    # privileged: only jaxplay makes these
    {"type": "accepted", "run_id": "evil", "worker": WORKER, "cached": True},
    {"type": "done", "status": "ok", "ms": 1, "reason": "", "cached": True},
    # outputs the request did not ask for, a pipeline it does not have
    {"type": "timing", "rows": [], "notes": ["evil"]},
    {"type": "cost", "flops": 1e30},
    {"type": "stablehlo", "text": "evil", "sources": []},
    {"type": "hlo", "text": "evil", "sources": []},
    {"type": "jaxpr", "text": "evil", "sources": [], "pipeline": "3"},
    {"type": "value", "repr": "evil", "tree": [], "pipeline": "2"},
    {"type": "stderr", "text": "evil", "pipeline": "9"},
    # stages: invented, one this request has none of, one longer than the run
    {"type": "stage", "stage": "evil", "ms": 1},
    {"type": "stage", "stage": "compile", "ms": 1},
    {"type": "stage", "stage": "trace", "ms": 1e8},
    # an error that links away from JAX's documentation
    {"type": "error", "stage": "exec", "kind": "E", "message": "m", "doc_url": "https://evil.example/"},
]  # fmt: skip


def test_a_line_without_the_run_s_token_is_refused_and_the_engine_s_is_shown(
    server: LiveServer,
) -> None:
    forging = (
        "import json, os, sys\n"
        "line = {'type': 'jaxpr', 'pipeline': 'main', 'text': 'FORGED', 'sources': []}\n"
        "os.write(sys.stdout._emitter._fd, json.dumps(line).encode() + b'\\n')\n"
    )
    events = post(server, {"code": forging + ENTRY, "args": "(1.0,)", "outputs": ["jaxpr"]})
    jaxprs = [e for e in events if e["type"] == "jaxpr"]
    assert len(jaxprs) == 1 and "FORGED" not in jaxprs[0]["text"], jaxprs  # the engine's
    done = events[-1]
    assert done["status"] == "tampered" and done["dropped"] == 1, done
    assert done["reason"].startswith(TAMPERED_REASON) and "no run token" in done["reason"]


def test_forged_events_of_every_type(server: LiveServer) -> None:
    forging = "\n".join(f"forge({event!r})" for event in FORGED)
    forging += "\nforge({'type': 'stdout', 'text': 'hi\\n', 'evil': 1, 'cached': True})"
    with RssWatch(server) as rss:
        events = forged_run(server, forging)
    done = events[-1]
    text = json.dumps(events)
    assert "evil" not in text and '"cached"' not in text, text[:2000]
    assert [e["type"] for e in events].count("accepted") == 1 and events[0]["type"] == "accepted"
    assert events[0]["worker"]["device_kind"] != "evil"
    assert {e["type"] for e in events} == {"accepted", "stdout", "stage", "jaxpr", "value", "done"}
    assert [e["text"] for e in events if e["type"] == "stdout"] == ["hi\n"]
    assert done["status"] == "tampered" and done["dropped"] == len(FORGED), done
    assert "refused" in done["reason"]
    metrics = httpx.get(server.url + "/metrics", timeout=10).text
    assert "evil" not in metrics
    assert_server_well(server, rss.peak)


def test_a_forged_error_with_a_jax_link_makes_the_run_not_ok(server: LiveServer) -> None:
    # An error event that is well formed passes (user code may raise too), and then
    # the run is not "ok" whatever the worker's done says (the engine's own done,
    # refused as a second one, makes it "tampered").
    error = {"type": "error", "stage": "exec", "kind": "E", "message": "m",
             "doc_url": "https://docs.jax.dev/en/latest/errors.html"}  # fmt: skip
    events = forged_run(
        server,
        f"forge({error!r})\nforge({{'type': 'done', 'status': 'ok', 'ms': 1, 'reason': ''}})",
    )
    assert events[-1]["status"] == "tampered", events[-1]


def test_a_label_flood(server: LiveServer) -> None:
    forging = "for i in range(20_000):\n    forge({'type': 'stage', 'stage': f's{i}', 'ms': 1})\n"
    with RssWatch(server) as rss:
        started = time.monotonic()
        events = forged_run(server, forging, timeout_s=60)
        took = time.monotonic() - started
        with httpx.Client(base_url=server.url, timeout=10) as client:
            for i in range(300):  # invented HTTP methods and paths
                client.request(f"M{i}", f"/nowhere/{i}")
    done = events[-1]
    assert done["status"] == "killed" and "100 event lines refused" in done["reason"], done
    assert took < 30, "the run ended at its real end, not at its wall clock (60 s)"
    metrics = httpx.get(server.url + "/metrics", timeout=10).text
    assert "s{" not in metrics and "s19999" not in metrics and "M299" not in metrics
    assert all(line.split("{")[0].startswith(("jaxplay_", "process_", "python_", "#"))
               for line in metrics.splitlines() if line)  # fmt: skip
    assert len(metrics) < 128 * 1024, len(metrics)
    assert_server_well(server, rss.peak)


def test_json_amplification(server: LiveServer) -> None:
    # Four lines of millions of {} (each refused before it is parsed), then four of
    # 14 MiB, over the line limit: the first ends the run.
    amplify = """
small = b'{"type":"value","repr":"","tree":[' + b','.join([b'{}'] * (7 * 2**20 // 3)) + b']}'
for _ in range(4):
    forge(small)
"""
    with RssWatch(server) as rss:
        events = forged_run(server, amplify)
        assert events[-1]["status"] == "tampered" and events[-1]["dropped"] == 4, events[-1]
        assert "JSON values" in events[-1]["reason"]
        huge = amplify.replace("7 * 2**20", "14 * 2**20")
        events = forged_run(server, huge)
    assert events[-1]["status"] == "killed" and "over 8 MiB" in events[-1]["reason"], events[-1]
    assert_server_well(server, rss.peak)


BAD_LINES = [
    b"DEEP",  # 100,000 deep: made in the run (code is at most 64 KiB)
    b'{"type":"stage","stage":"exec","ms":NaN}',
    b'{"type":"stage","stage":"exec","ms":Infinity}',
    b'{"type":"stage","stage":"exec","ms":1e999}',
    b'{"type":"stdout","text":"\\ud800"}',
    b'{"type":"stdout","text":"\xff\xfe"}',
    b"not json at all",
]


def test_deep_nesting_nan_infinity_lone_surrogates(server: LiveServer) -> None:
    forging = "\n".join(f"forge({line!r})" for line in BAD_LINES)
    forging = forging.replace("b'DEEP'", "b'[' * 100_000 + b']' * 100_000")
    with RssWatch(server) as rss:
        events = forged_run(server, forging)
    done = events[-1]
    assert done["status"] == "tampered" and done["dropped"] == len(BAD_LINES), done
    assert [e["type"] for e in events if e["type"] in ("jaxpr", "value")] == ["jaxpr", "value"]
    assert_server_well(server, rss.peak)


#: Valid, large events: one IR text of almost 2 Mi characters per view and pipeline
#: (15 events, ~30 MiB), written as fast as the pipe takes them.
BIG = """
for view in ("jaxpr", "stablehlo", "hlo"):
    for pipeline in ("main", "0", "1", "2", "3"):
        forge({"type": view, "text": "x" * (2 * 2**20 - 100), "sources": [], "pipeline": pipeline})
"""


def _stalled_socket(server: LiveServer, head: bytes, body: bytes, upgrade: bool) -> socket.socket:
    """A client that sends its request, then never reads: a small receive buffer, so
    the kernel does not read for it either. A WebSocket's frame goes after the 101."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(head if upgrade else head + body)
    if upgrade:
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(1)
        assert answer.startswith(b"HTTP/1.1 101"), answer
        sock.sendall(body)
    return sock


def _ws_frame(text: str) -> bytes:
    """One masked text frame, as a client sends it (RFC 6455)."""
    payload, mask = text.encode(), os.urandom(4)
    n = len(payload)
    size = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack("!H", n)
    if n >= 65536:
        size = bytes([0x80 | 127]) + struct.pack("!Q", n)
    return b"\x81" + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


@pytest.mark.parametrize("transport", ["websocket", "ndjson"])
def test_a_client_that_stops_reading(server: LiveServer, transport: str) -> None:
    request = {
        "code": FORGE + BIG + ENTRY,
        "args": "(1.0,)",
        "outputs": ["jaxpr", "stablehlo", "hlo"],
        "compare": [[{"name": "jit"}]] * 4,
        "timeout_s": 60,
    }
    if transport == "websocket":
        key = base64.b64encode(os.urandom(16)).decode()
        head = (
            f"GET /api/v1/ws HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
        body = _ws_frame(json.dumps({"type": "run", "seq": 1, "payload": request}))
    else:
        body = json.dumps(request).encode()
        head = (
            f"POST /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            "Accept: application/x-ndjson\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
    with RssWatch(server) as rss:
        started = time.monotonic()
        sock = _stalled_socket(server, head, body, upgrade=transport == "websocket")
        try:
            # The run waits for the client (its events, ~30 MiB, cannot all go out),
            # and the server drops the client STALL_S after the socket filled: long
            # before the run's own 60 s.
            began: float | None = None  # when the run was first seen in flight
            deadline = started + STALL_S + 40  # a slow machine may start the zygote late
            while time.monotonic() < deadline:
                time.sleep(0.25)
                metrics = httpx.get(server.url + "/metrics", timeout=10).text
                running = "jaxplay_runs_in_flight 1.0" in metrics
                began = time.monotonic() if running and began is None else began
                if began is not None and not running:
                    break
            else:
                pytest.fail(f"the stalled client's run is still in flight ({began=})")
            # held while the client did not read (unheld, it takes under a second),
            # then ended by the stall timeout
            assert time.monotonic() - began >= STALL_S - 1.5
        finally:
            sock.close()
    assert time.monotonic() - started < 50  # well before the run's own 60 s + grace
    assert "jaxplay_websocket_connections 0.0" in metrics
    assert_server_well(server, rss.peak)


def test_the_metrics_port_and_the_public_switch(tmp_path: Path) -> None:
    from tests.support.ports import free_port

    port = free_port()
    env = {"JAXPLAY_METRICS_PUBLIC": "false", "JAXPLAY_METRICS_PORT": str(port)}
    live = LiveServer(tmp_path / "m.sqlite3", "--pool", "fake", env=env).start()
    try:
        assert httpx.get(live.url + "/metrics", timeout=10).status_code == 404
        private = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert private.status_code == 200 and "jaxplay_runs_in_flight" in private.text
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 404
    finally:
        live.stop()
