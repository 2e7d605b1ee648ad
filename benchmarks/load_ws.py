"""Load test: many concurrent WebSocket clients, each sending several runs.

Every run must either end with ``done`` or be refused cleanly (an ``error`` envelope
with status 429/503); anything else (a dropped connection, a missing ``done``, a
malformed envelope) counts as a failure. Reports latency percentiles, the refusals,
the server's memory (VmRSS sampled, VmHWM at the end) and whether it imported JAX.

    .venv/bin/python benchmarks/load_ws.py                       # starts its own server (pool auto)
    .venv/bin/python benchmarks/load_ws.py --pool tests.server.fakes:FakePool   # server overhead only
    .venv/bin/python benchmarks/load_ws.py --url http://127.0.0.1:8000 --pid 1234

Exit status 1 when a run failed, the server grew past --max-rss-mb, or it imported JAX.
Only ever talks to 127.0.0.1 (or the --url given); bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Tally:
    latency_s: list[float] = field(default_factory=list)  # send -> done
    first_s: list[float] = field(default_factory=list)  # send -> first event
    statuses: dict[str, int] = field(default_factory=dict)
    refused: dict[int, int] = field(default_factory=dict)
    cached: int = 0
    failures: list[str] = field(default_factory=list)


def request_for(client: int, run: int, outputs: list[str], cache: bool) -> dict[str, Any]:
    # Different code per client and run, so the cache cannot answer unless asked to.
    scale = 1.0 if cache else client + run / 10
    return {
        "code": f"import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.sin(x * {scale}) ** 2)\n",
        "args": "(jnp.ones((8,)),)",
        "transforms": [{"name": "grad"}, {"name": "jit"}],
        "outputs": outputs,
        "timeout_s": 60,
        "cache": cache,
    }


async def one_client(url: str, index: int, args: argparse.Namespace, tally: Tally) -> None:
    token = f"load-{index}"
    try:
        async with websockets.connect(
            f"{url}?token={token}", open_timeout=30, max_size=2**24
        ) as ws:
            hello = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if hello.get("type") != "hello":
                tally.failures.append(f"client {index}: no hello: {hello}")
                return
            for seq in range(args.runs):
                body = request_for(index, seq, args.outputs, args.cache)
                sent = time.monotonic()
                await ws.send(json.dumps({"type": "run", "seq": seq, "payload": body}))
                first = None
                while True:
                    raw = await asyncio.wait_for(ws.recv(), args.run_timeout)
                    message = json.loads(raw)
                    if message.get("seq") != seq:
                        tally.failures.append(
                            f"client {index}: message for seq {message.get('seq')} during {seq}"
                        )
                        continue
                    if first is None:
                        first = time.monotonic() - sent
                    if message["type"] == "error":
                        status = message["payload"].get("status")
                        if status in (429, 503):
                            tally.refused[status] = tally.refused.get(status, 0) + 1
                            if args.backoff:
                                await asyncio.sleep(
                                    min(message["payload"].get("retry_after_s") or 1, 5)
                                )
                        else:
                            tally.failures.append(
                                f"client {index} run {seq}: error {message['payload']}"
                            )
                        break
                    event = message["payload"]
                    if event["type"] == "done":
                        tally.latency_s.append(time.monotonic() - sent)
                        tally.first_s.append(first)
                        tally.statuses[event["status"]] = tally.statuses.get(event["status"], 0) + 1
                        tally.cached += bool(event.get("cached"))
                        break
    except (OSError, TimeoutError, websockets.WebSocketException) as exc:
        tally.failures.append(f"client {index}: {type(exc).__name__}: {exc}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(args: argparse.Namespace, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "JAXPLAY_LOG_LEVEL": "warning",
        "JAXPLAY_API_TOKENS": json.dumps([f"load-{i}" for i in range(args.clients)]),
    }
    argv = [
        sys.executable,
        "-m",
        "backend.serve_cli",
        "--port",
        str(port),
        "--database-url",
        f"sqlite:///{workdir / 'load.sqlite3'}",
        "--pool",
        args.pool,
    ]
    if args.pool not in ("zygote", "auto", "fake"):
        argv.append("--unsafe-no-jail")
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 (lives as long as the server)
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited: {(workdir / 'server.log').read_text()[-2000:]}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    sys.exit("the server did not start")


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in bytes."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024
    return values.get("VmRSS", 0), values.get("VmHWM", 0)


async def sample_rss(pid: int, samples: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append(memory(pid)[0])
        with __import__("contextlib").suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def main_async(args: argparse.Namespace, url: str, pid: int | None) -> dict[str, Any]:
    if args.warmup:
        # One run first so the pool is warm and the server knows its worker.
        async with websockets.connect(
            url.replace("http", "ws", 1) + "/api/v1/ws?token=load-0"
        ) as ws:
            await ws.recv()
            await ws.send(
                json.dumps(
                    {"type": "run", "seq": 0, "payload": request_for(999, 0, args.outputs, False)}
                )
            )
            while (
                json.loads(await asyncio.wait_for(ws.recv(), 120))["payload"].get("type") != "done"
            ):
                pass
    tally = Tally()
    samples: list[int] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_rss(pid, samples, stop)) if pid else None
    ws_url = url.replace("http", "ws", 1) + "/api/v1/ws"
    started = time.monotonic()
    await asyncio.wait_for(
        asyncio.gather(*(one_client(ws_url, i, args, tally) for i in range(args.clients))),
        args.deadline,
    )
    wall = time.monotonic() - started
    stop.set()
    if sampler:
        await sampler
    health = httpx.get(url + "/healthz", timeout=5).json()
    result: dict[str, Any] = {
        "clients": args.clients,
        "runs_per_client": args.runs,
        "wall_s": round(wall, 2),
        "completed": len(tally.latency_s),
        "statuses": tally.statuses,
        "cached": tally.cached,
        "refused": {str(k): v for k, v in tally.refused.items()},
        "failures": len(tally.failures),
        "failure_examples": tally.failures[:5],
        "latency_ms": {
            f"p{q}": round(pct(tally.latency_s, q) * 1000, 1) for q in (50, 90, 99, 100)
        },
        "first_event_ms": {f"p{q}": round(pct(tally.first_s, q) * 1000, 1) for q in (50, 90, 99)},
        "mean_ms": round(statistics.fmean(tally.latency_s) * 1000, 1) if tally.latency_s else None,
        "server_jax_imported": health.get("jax_imported"),
    }
    if pid:
        rss, hwm = memory(pid)
        maps = Path(f"/proc/{pid}/maps").read_text()
        result.update(
            server_rss_mb_max_sampled=round(max(samples, default=rss) / 2**20, 1),
            server_rss_mb_end=round(rss / 2**20, 1),
            server_peak_rss_mb=round(hwm / 2**20, 1),
            server_maps_jaxlib="jaxlib" in maps or "xla_extension" in maps,
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--url", help="a running server (default: start one on a free loopback port)"
    )
    parser.add_argument("--pid", type=int, help="the running server's pid, for its memory")
    parser.add_argument("--pool", default="auto", help="the pool of the server this script starts")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--outputs", nargs="+", default=["jaxpr", "stablehlo", "hlo", "value", "cost"]
    )
    parser.add_argument(
        "--cache", action="store_true", help="let the cache answer (same code everywhere)"
    )
    parser.add_argument(
        "--backoff", action="store_true", help="after a refusal, wait its Retry-After"
    )
    parser.add_argument("--no-warmup", dest="warmup", action="store_false")
    parser.add_argument(
        "--run-timeout", type=float, default=120.0, help="longest wait for one run's next message"
    )
    parser.add_argument(
        "--deadline", type=float, default=900.0, help="the whole test stops after this"
    )
    parser.add_argument("--max-rss-mb", type=float, default=120.0)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()

    proc = None
    workdir = Path(tempfile.mkdtemp(prefix="jaxplay-load-"))
    try:
        if args.url:
            url, pid = args.url.rstrip("/"), args.pid
        else:
            proc, url = start_server(args, workdir)
            pid = proc.pid
        result = asyncio.run(main_async(args, url, pid))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
    ok = (
        result["failures"] == 0
        and not result["server_jax_imported"]
        and not result.get("server_maps_jaxlib", False)
        and result.get("server_peak_rss_mb", 0) <= args.max_rss_mb
    )
    result["ok"] = ok
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key, value in result.items():
            print(f"{key:28} {value}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
