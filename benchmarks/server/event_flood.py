"""Event floods against a real server: its memory and /metrics while user code
floods the event pipe and a client stops reading, and a normal run's latency
beside a flooding one.

Starts ``jaxplay serve`` on the jailed warm pool (loopback, a free port), then, one
scenario at a time, samples the server's RSS and times ``GET /metrics`` every 50 ms:

- idle: nothing running (the baseline);
- stage flood: a run writes 20,000 forged ``stage`` events with invented names;
- amplification: four 7 MiB lines of ``{}`` (refused before parsing), then a
  14 MiB one (over the line limit: the run ends);
- bad lines: 100,000-deep nesting, NaN, Infinity, a lone surrogate, invalid UTF-8;
- stalled client: a WebSocket client that stops reading while its run writes
  ~30 MiB of valid events (15 IR texts of 2 Mi characters), until the server
  drops it (``JAXPLAY_CLIENT_STALL_TIMEOUT_S``, 3 s here).

Then the median of 10 normal runs (grad of a small function, jaxpr and value)
alone, and again while another client runs flooding runs back to back.

    .venv/bin/python benchmarks/server/event_flood.py [--runs 10] [--json]

The render time is the server's own measure (``jaxplay_metrics_render_seconds``);
the answer time is what the client waited, which also counts the event loop's other
work (a refused 7 MiB line costs it ~50 ms to scan) and the machine's load.
Exit status 1 if the server's RSS passed --max-rss-mb (150) or a /metrics render
took over --max-metrics-ms (50) at any sample.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.live_server import LiveServer  # noqa: E402

STALL_S = 3.0
FORGE = """
import json, os, sys
_FD = sys.stdout._emitter._fd
def forge(event):
    line = event if isinstance(event, bytes) else json.dumps(event).encode()
    os.write(_FD, line + b"\\n")
"""
ENTRY = "\ndef f(x):\n    return x * 2.0\n"
STAGE_FLOOD = "for i in range(20_000):\n    forge({'type': 'stage', 'stage': f's{i}', 'ms': 1})\n"
AMPLIFY = """
line = b'{"type":"value","repr":"","tree":[' + b','.join([b'{}'] * (SIZE // 3)) + b']}'
for _ in range(COUNT):
    forge(line)
"""
BAD_LINES = """
forge(b'[' * 100_000 + b']' * 100_000)
forge(b'{"type":"stage","stage":"exec","ms":NaN}')
forge(b'{"type":"stage","stage":"exec","ms":Infinity}')
forge(b'{"type":"stdout","text":"\\\\ud800"}')
forge(b'{"type":"stdout","text":"\\xff\\xfe"}')
"""
BIG = """
for view in ("jaxpr", "stablehlo", "hlo"):
    for pipeline in ("main", "0", "1", "2", "3"):
        forge({"type": view, "text": "x" * (2 * 2**20 - 100), "sources": [], "pipeline": pipeline})
"""
NORMAL = {
    "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.tanh(x) ** 2)\n",
    "args": "(jnp.ones((3,)),)",
    "transforms": [{"name": "grad"}],
    "outputs": ["jaxpr", "value"],
    "cache": False,
}


def forged(code: str, **request: Any) -> dict[str, Any]:
    body = {"code": FORGE + code + ENTRY, "args": "(1.0,)", "outputs": ["jaxpr", "value"]}
    return {**body, "cache": False, **request}


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(url + "/api/v1/runs", json=body, timeout=120)
    r.raise_for_status()
    done: dict[str, Any] = r.json()["events"][-1]
    return done


class Sampler:
    """The server's RSS and the time of ``GET /metrics``, every 50 ms."""

    def __init__(self, server: LiveServer) -> None:
        self.server = server
        self.rss: list[int] = []
        self.metrics_ms: list[float] = []  # the answer, as the client waits for it
        self.render_ms: list[float] = []  # the rendering, as the server measured it
        self.metrics_bytes = 0
        self._stop = threading.Event()

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                self.rss.append(self.server.rss_bytes())
                started = time.perf_counter()
                body = client.get(self.server.url + "/metrics").content
                self.metrics_ms.append((time.perf_counter() - started) * 1000)
                self.metrics_bytes = len(body)
                for line in body.decode().splitlines():
                    if line.startswith("jaxplay_metrics_render_seconds "):
                        self.render_ms.append(float(line.split()[1]) * 1000)
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _ws_frame(text: str) -> bytes:
    payload, mask = text.encode(), os.urandom(4)
    n = len(payload)
    if n < 126:
        size = bytes([0x80 | n])
    elif n < 65536:
        size = bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        size = bytes([0x80 | 127]) + struct.pack("!Q", n)
    return b"\x81" + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def stalled_client(server: LiveServer) -> str:
    """A WebSocket client that sends a run of ~30 MiB of events and never reads;
    returns once the server has dropped it (no run in flight, no socket open)."""
    request = forged(
        BIG, outputs=["jaxpr", "stablehlo", "hlo"], compare=[[{"name": "jit"}]] * 4, timeout_s=60
    )
    key = base64.b64encode(os.urandom(16)).decode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(
        f"GET /api/v1/ws HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(1)
    sock.sendall(_ws_frame(json.dumps({"type": "run", "seq": 1, "payload": request})))
    started = time.monotonic()
    try:
        while time.monotonic() - started < 60:
            time.sleep(0.25)
            text = httpx.get(server.url + "/metrics", timeout=10).text
            if (
                time.monotonic() - started > 1
                and "jaxplay_runs_in_flight 0.0" in text
                and "jaxplay_websocket_connections 0.0" in text
            ):
                return f"dropped after {time.monotonic() - started:.1f} s"
        return "never dropped"
    finally:
        sock.close()


def scenario(server: LiveServer, name: str, act: Callable[[], str]) -> dict[str, Any]:
    with Sampler(server) as sample:
        outcome = act()
        time.sleep(0.5)
    ms = sorted(sample.metrics_ms)
    render = sorted(sample.render_ms)
    row = {
        "scenario": name,
        "rss_peak_mb": max(sample.rss) / 2**20,
        "rss_after_mb": server.rss_bytes() / 2**20,
        "render_p50_ms": statistics.median(render),
        "render_max_ms": render[-1],
        "metrics_p50_ms": statistics.median(ms),
        "metrics_max_ms": ms[-1],
        "metrics_samples": len(ms),
        "metrics_kb": sample.metrics_bytes / 1024,
        "outcome": outcome,
    }
    print(
        f"| {name} | {row['rss_peak_mb']:.0f} | {row['rss_after_mb']:.0f} | "
        f"{row['render_p50_ms']:.1f} / {row['render_max_ms']:.1f} | "
        f"{row['metrics_p50_ms']:.1f} / {row['metrics_max_ms']:.1f} ({len(ms)}) | "
        f"{row['metrics_kb']:.1f} | {outcome} |",
        flush=True,
    )
    return row


def _done(done: dict[str, Any]) -> str:
    return f"{done['status']}: {done.get('reason', '')[:70]}"


def normal_p50(server: LiveServer, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        assert post(server.url, NORMAL)["status"] == "ok"
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="normal runs timed, each way")
    parser.add_argument("--max-rss-mb", type=float, default=150.0)
    parser.add_argument("--max-metrics-ms", type=float, default=50.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    env = {
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
        "JAXPLAY_CACHE_ENABLED": "false",
        "JAXPLAY_CLIENT_STALL_TIMEOUT_S": str(STALL_S),
        "JAXPLAY_MAX_RUNS_PER_TENANT": "4",
        "JAXPLAY_MAX_RUNS_PER_CLIENT": "4",
    }
    workdir = Path(tempfile.mkdtemp(prefix="jaxplay-flood-"))
    server = LiveServer(workdir / "db.sqlite3", "--pool", "zygote", env=env).start()
    rows: list[dict[str, Any]] = []
    try:
        post(server.url, NORMAL)  # warm: the tenant's zygote
        print("| scenario | server RSS peak (MB) | after (MB) | /metrics render p50 / max ms "
              "| /metrics answer p50 / max ms (samples) | /metrics KiB | outcome |")  # fmt: skip
        print("| --- | --- | --- | --- | --- | --- | --- |")
        rows.append(scenario(server, "idle", lambda: (time.sleep(2), "-")[1]))
        rows.append(scenario(server, "20,000 forged stage events",
                             lambda: _done(post(server.url, forged(STAGE_FLOOD)))))  # fmt: skip

        def amplify() -> str:
            small = AMPLIFY.replace("SIZE", str(7 * 2**20)).replace("COUNT", "4")
            huge = AMPLIFY.replace("SIZE", str(14 * 2**20)).replace("COUNT", "4")
            first = post(server.url, forged(small))
            return f"{_done(first)} / {_done(post(server.url, forged(huge)))}"

        rows.append(scenario(server, "4 x 7 MiB of {}, then 14 MiB lines", amplify))
        rows.append(scenario(server, "deep, NaN, Infinity, surrogate, bad UTF-8",
                             lambda: _done(post(server.url, forged(BAD_LINES)))))  # fmt: skip
        rows.append(scenario(server, "client stops reading (30 MiB of events)",
                             lambda: stalled_client(server)))  # fmt: skip

        alone = normal_p50(server, args.runs)
        stop = threading.Event()

        def flood() -> None:
            while not stop.is_set():
                post(server.url, forged(STAGE_FLOOD))
                post(
                    server.url,
                    forged(AMPLIFY.replace("SIZE", str(7 * 2**20)).replace("COUNT", "4")),
                )

        flooder = threading.Thread(target=flood, daemon=True)
        flooder.start()
        time.sleep(1)
        beside = normal_p50(server, args.runs)
        stop.set()
        flooder.join()
        print()
        print("| normal run (grad, jaxpr + value) | p50 ms |")
        print("| --- | --- |")
        print(f"| alone | {alone:.0f} |")
        print(f"| beside a client flooding events | {beside:.0f} |")
        peak = max(r["rss_peak_mb"] for r in rows)
        worst = max(r["render_max_ms"] for r in rows)
        if args.json:
            print(
                json.dumps(
                    {"scenarios": rows, "normal_p50_ms": alone, "beside_flood_p50_ms": beside}
                )
            )
        ok = peak <= args.max_rss_mb and worst <= args.max_metrics_ms
        print(f"\nserver RSS peak {peak:.0f} MB (limit {args.max_rss_mb:.0f}); "
              f"slowest /metrics render {worst:.1f} ms (limit {args.max_metrics_ms:.0f}): "
              f"{'ok' if ok else 'OVER'}")  # fmt: skip
        return 0 if ok else 1
    finally:
        server.stop()


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    sys.exit(main())
