"""Throughput under load: many WebSocket clients sending runs back to back, against
what the machine can do (issue 11), side by side in one run.

1. The machine's capacity: the same run (a ``grad`` + ``jit`` pipeline, every output
   but timing, new code text each time) through the engine's ``run_message`` in a loop
   in ONE warm process (a child, so this one never imports JAX); its median CPU
   seconds per run (every thread of the process) give capacity = CPUs / CPU-s.
2. ``--clients`` WebSocket clients (each its own API token, so its own tenant) against
   a real ``jaxplay serve`` (tests.support.live_server.LiveServer), each sending its next run
   as soon as the last one ended, for ``--duration`` seconds. A run refused with
   429/503 is not a failure: the client waits its ``Retry-After`` (capped at the time
   left) and sends again. A failure is anything else (a dropped connection, a missing
   ``done``, an error that is not 429/503, a run that did not end ``ok``).

   With ``--scripts N``, N REST clients (NDJSON, a token each) do the same beside them
   (issue 52's mix: 64 page sessions and 16 scripts). Before the window every client
   has its first run, all at once (``established_first_runs_s``: until the last was
   served), so the window measures sessions editing, not arriving (each arrival is a
   new jail: benchmarks/pool/new_jail.py measures those); ``--no-establish`` counts them in.

Prints completed runs per second (those that ended within the duration), the
refusals by status and reason (each must carry ``Retry-After``: one that does not is
a failure), failures, p50/p95/p99 latency (send to ``done``), to the first
``jaxpr`` event (issue 52: p99 <= 3x p50) and the wait as a person sees it (from a
run's first attempt, its refusals and their waits included, to its ``done``; a run
never served in the window counts its wait so far), fairness (each client's p95 wait
against the median client's: target <= 3x), the
ratio completed/capacity (target >= 0.8), the pool's own figures, the server's CPU
and memory (VmRSS sampled, VmHWM at the end) and whether it imported JAX.

    .venv/bin/python benchmarks/server/load_ws.py                          # 64 clients, 30 s
    .venv/bin/python benchmarks/server/load_ws.py --scripts 16             # 64 pages + 16 scripts
    JAXPLAY_POOL_SIZE=16 .venv/bin/python benchmarks/server/load_ws.py     # a larger pool
    .venv/bin/python benchmarks/server/load_ws.py --pool tests.server.fakes:FakePool  # server only
    .venv/bin/python benchmarks/server/load_ws.py --url http://127.0.0.1:8000 --pid 1234

The server this script starts has its per-client rate limit off (the target is the
machine's throughput, not a policy's); its other settings are the defaults, or what
the environment sets (``JAXPLAY_*``). Exit status 1 when a run failed, the server grew
past --max-rss-mb, or it imported JAX. Only ever talks to 127.0.0.1 (or --url).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.support.procfs import cpu_s, machine_busy_s, memory, stat_fields  # noqa: E402
from benchmarks.support.stats import percentile, spread  # noqa: E402
from tests.support.live_server import LiveServer  # noqa: E402

OUTPUTS = ["jaxpr", "stablehlo", "hlo", "value", "cost"]


@dataclass
class Tally:
    latency_s: list[float] = field(default_factory=list)  # send -> done, ended in time
    first_jaxpr_s: list[float] = field(default_factory=list)  # send -> the first jaxpr event
    #: each client's send -> done (fairness: no client's p95 over 3x the median client's)
    per_client_s: dict[str, list[float]] = field(default_factory=dict)
    #: each client's wait as a person sees it: from the first attempt of a run (its
    #: refusals and their Retry-After included) to its done; a run still not done when
    #: the window closed counts its wait so far (a lower bound: it was never served)
    waits_s: dict[str, list[float]] = field(default_factory=dict)
    no_retry_after: int = 0  # 429/503 refusals that did not say when to come back
    late: int = 0  # completed after the duration (not counted in the rate)
    statuses: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)  # "503 server_busy: every ..."
    cached: int = 0
    failures: list[str] = field(default_factory=list)


def request_for(client: int, run: int, cache: bool) -> dict[str, Any]:
    # New code text per client and run (an edit), so the cache cannot answer unless asked.
    scale = 1.0 if cache else 1.0 + client / 100 + run / 100_000
    return {
        "code": f"import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.sin(x * {scale!r}) ** 2)\n",
        "args": "(jnp.ones((8,)),)",
        "transforms": [{"name": "grad"}, {"name": "jit"}],
        "outputs": OUTPUTS,
        "timeout_s": 60,
        "cache": cache,
    }


# --- 1. the warm process ------------------------------------------------------------


def warm_main(runs: int) -> None:
    """In a child: ``runs`` runs through run_message after two to warm up; prints the
    CPU seconds of each (all the process's threads)."""
    from sandbox.engine import worker
    from sandbox.protocol import RunRequest

    devnull = os.open(os.devnull, os.O_WRONLY)
    cpu: list[float] = []
    for seq in range(runs + 2):
        body = {k: v for k, v in request_for(0, seq, False).items() if k != "cache"}
        message = {"protocol": 1, "run_id": "warm", "request": RunRequest(**body).model_dump()}
        started = time.process_time()
        worker.run_message(message, devnull)
        if seq >= 2:
            cpu.append(time.process_time() - started)
    sys.stdout = sys.__stdout__
    print(json.dumps(cpu))


def measure_warm(runs: int) -> list[float]:
    out = subprocess.run(
        [sys.executable, __file__, "--warm-child", str(runs)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return [float(x) for x in json.loads(out.stdout.strip().splitlines()[-1])]


# --- 2. the clients -------------------------------------------------------------------


async def one_client(
    ws_url: str,
    index: int,
    args: argparse.Namespace,
    tally: Tally,
    end: float,
    runs: float = math.inf,
    first: int = 1,
) -> None:
    """A page session sending runs back to back until ``end`` or ``runs`` of them
    ended; its runs are numbered from ``first`` (each number a new code text)."""
    seq, answered = first - 1, 0
    try:
        async with websockets.connect(
            f"{ws_url}?token=load-{index}", open_timeout=30, max_size=2**24
        ) as ws:
            hello = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if hello.get("type") != "hello":
                tally.failures.append(f"client {index}: no hello: {hello}")
                return
            wanted: float | None = None
            while time.monotonic() < end and answered < runs:
                seq += 1
                sent = time.monotonic()
                wanted = sent if wanted is None else wanted
                body = request_for(index, seq, args.cache)
                await ws.send(json.dumps({"type": "run", "seq": seq, "payload": body}))
                first_jaxpr: float | None = None
                while True:
                    message = json.loads(await asyncio.wait_for(ws.recv(), args.run_timeout))
                    if message.get("seq") != seq:
                        tally.failures.append(
                            f"client {index}: message for seq {message.get('seq')} during {seq}"
                        )
                        continue
                    if message["type"] == "error":
                        error = message["payload"]
                        if error.get("status") in (429, 503):
                            key = f"{error['status']}: {reason(error)}"
                            tally.refused[key] = tally.refused.get(key, 0) + 1
                            if error.get("retry_after_s") is None:
                                tally.no_retry_after += 1
                                tally.failures.append(
                                    f"client {index}: {key} without retry_after_s"
                                )
                            wait = float(error.get("retry_after_s") or 1.0)
                            await asyncio.sleep(max(0.0, min(wait, end - time.monotonic())))
                        else:
                            tally.failures.append(f"client {index} run {seq}: error {error}")
                        break
                    event = message["payload"]
                    if event["type"] == "jaxpr" and first_jaxpr is None:
                        first_jaxpr = time.monotonic() - sent
                    if event["type"] == "done":
                        ended = time.monotonic()
                        answered += 1
                        status = event["status"]
                        tally.statuses[status] = tally.statuses.get(status, 0) + 1
                        if status != "ok":
                            tally.failures.append(f"client {index} run {seq}: ended {status}")
                        elif ended <= end:
                            tally.latency_s.append(ended - sent)
                            tally.per_client_s.setdefault(f"page {index}", []).append(ended - sent)
                            tally.waits_s.setdefault(f"page {index}", []).append(ended - wanted)
                            wanted = None
                            if first_jaxpr is not None:
                                tally.first_jaxpr_s.append(first_jaxpr)
                            tally.cached += bool(event.get("cached"))
                        else:
                            tally.late += 1
                        break
            if wanted is not None:
                tally.waits_s.setdefault(f"page {index}", []).append(end - wanted)
    except (OSError, TimeoutError, websockets.WebSocketException) as exc:
        tally.failures.append(f"client {index} run {seq}: {type(exc).__name__}: {exc}")


async def one_script(
    url: str,
    index: int,
    args: argparse.Namespace,
    tally: Tally,
    end: float,
    runs: float = math.inf,
    first: int = 1,
) -> None:
    """A script over REST (NDJSON, its own token) sending runs back to back: the
    page sessions' neighbours that issue 52 counts (64 pages and 16 scripts). Until
    ``end`` or ``runs`` of them ended, numbered from ``first``."""
    seq, answered = first - 1, 0
    headers = {"Authorization": f"Bearer script-{index}", "Accept": "application/x-ndjson"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=args.run_timeout) as http:
        wanted: float | None = None
        while time.monotonic() < end and answered < runs:
            seq += 1
            sent = time.monotonic()
            wanted = sent if wanted is None else wanted
            first_jaxpr: float | None = None
            # distinct from every page client's code (their scale is under 1.64)
            body = request_for(1000 + index, seq, args.cache)
            try:
                async with http.stream("POST", "/api/v1/runs", json=body) as r:
                    if r.status_code in (429, 503):
                        error = json.loads(await r.aread())
                        key = f"{r.status_code}: {reason(error)}"
                        tally.refused[key] = tally.refused.get(key, 0) + 1
                        if "retry-after" not in r.headers:
                            tally.no_retry_after += 1
                            tally.failures.append(f"script {index}: {key} without Retry-After")
                        wait = float(r.headers.get("retry-after") or 1.0)
                        await asyncio.sleep(max(0.0, min(wait, end - time.monotonic())))
                        continue
                    if r.status_code != 200:
                        tally.failures.append(f"script {index} run {seq}: {r.status_code}")
                        continue
                    done = None
                    async for line in r.aiter_lines():
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        if event["type"] == "jaxpr" and first_jaxpr is None:
                            first_jaxpr = time.monotonic() - sent
                        if event["type"] == "done":
                            done = event
            except httpx.HTTPError as exc:
                tally.failures.append(f"script {index} run {seq}: {type(exc).__name__}: {exc}")
                continue
            ended = time.monotonic()
            answered += 1
            status = done["status"] if done else "no done"
            tally.statuses[status] = tally.statuses.get(status, 0) + 1
            if status != "ok":
                tally.failures.append(f"script {index} run {seq}: ended {status}")
            elif ended <= end:
                tally.latency_s.append(ended - sent)
                tally.per_client_s.setdefault(f"script {index}", []).append(ended - sent)
                tally.waits_s.setdefault(f"script {index}", []).append(ended - wanted)
                wanted = None
                if first_jaxpr is not None:
                    tally.first_jaxpr_s.append(first_jaxpr)
            else:
                tally.late += 1
        if wanted is not None:
            tally.waits_s.setdefault(f"script {index}", []).append(end - wanted)


def fairness(tally: Tally, clients: int) -> dict[str, Any]:
    """Each client's p95 wait (first attempt of a run, refusals included -> its done)
    against the median client's: issue 52's target is no client over 3x. A client
    never served in the window counts the wait it was left with, so a pool that
    serves a few clients while the rest are refused cannot read as fair."""
    p95s = sorted((percentile(v, 0.95), name) for name, v in tally.waits_s.items() if v)
    if not p95s:
        return {}
    median = statistics.median(p for p, _ in p95s)
    runs = sorted(len(v) for v in tally.per_client_s.values())
    runs = [0] * (clients - len(runs)) + runs
    return {
        "clients_without_a_run": clients - len(tally.per_client_s),
        "clients_with_a_run": len(tally.per_client_s),
        "median_client_p95_wait_ms": round(median * 1000, 1),
        "worst_client_p95_wait_ms": round(p95s[-1][0] * 1000, 1),
        "worst_client": p95s[-1][1],
        "worst_over_median": round(p95s[-1][0] / median, 2) if median else None,
        "runs_per_client_min_median_max": [runs[0], statistics.median(runs), runs[-1]],
    }


def reason(error: dict[str, Any]) -> str:
    """The refusal's kind, from its message (the numbers taken out)."""
    words = str(error.get("message", "")).split(";")[0].split()
    return " ".join(w for w in words if not any(c.isdigit() for c in w))[:60]


# --- measuring ------------------------------------------------------------------------


ZYGOTE_MARK = b"sandbox.zygote.main"


class TreeCPU:
    """CPU seconds used by a process and everything under it, by kind: the server,
    zygotes (a jail's JAX import and warm-up, their loop between runs), the run
    processes they fork (each run, and its pre-forked or kept process's start and
    after-run check), jailed processes of a launcher without the zygote's mark (a jail
    template's forks: each jail's own uid) and the rest (bubblewrap, launchers, the
    template). Sampled: each process's own
    user + system time as last seen, so a jail that was killed counts up to its last
    sample. A lower bound: a process that lived less than one sampling interval is
    missed (with kept processes, few do)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._start: dict[tuple[int, int], int] = {}
        self._last: dict[tuple[int, int], int] = {}
        self._kind: dict[tuple[int, int], str] = {}
        self.sample()
        self._start = dict(self._last)

    def sample(self) -> None:
        children: dict[int, list[int]] = {}
        stats: dict[int, list[str]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError):
                    fields = stat_fields(int(entry.name))
                    stats[int(entry.name)] = fields
                    children.setdefault(int(fields[1]), []).append(int(entry.name))
        todo = [(self.pid, False)]  # (pid, whether its parent is a zygote)
        while todo:
            current, under_zygote = todo.pop()
            own = stats.get(current)
            if own is None:
                continue
            key = (current, int(own[19]))  # with its start time: pids are reused
            if key not in self._kind:
                self._kind[key] = self._classify(current, under_zygote)
            self._last[key] = int(own[11]) + int(own[12])
            is_zygote = self._kind[key] == "zygotes"
            todo.extend((child, is_zygote) for child in children.get(current, []))

    def _classify(self, pid: int, under_zygote: bool) -> str:
        if pid == self.pid:
            return "server"
        try:
            forked = ZYGOTE_MARK in Path(f"/proc/{pid}/cmdline").read_bytes()
            uid = Path(f"/proc/{pid}").stat().st_uid
        except OSError:
            forked, uid = False, os.getuid()
        if forked:
            return "run processes" if under_zygote else "zygotes"
        if under_zygote:
            return "run processes"
        # Jails forked by another launcher (a jail template: the pool's rewrite for
        # fork-cost jails) carry no zygote mark: told apart by their own uid instead.
        return "jailed processes" if uid != os.getuid() else "jail plumbing"

    def seconds(self) -> dict[str, float]:
        """CPU seconds since this was made, by kind."""
        ticks: dict[str, int] = {}
        for key, value in self._last.items():
            kind = self._kind[key]
            ticks[kind] = ticks.get(kind, 0) + value - self._start.get(key, 0)
        return {k: v / os.sysconf("SC_CLK_TCK") for k, v in ticks.items()}


def rejected(url: str) -> dict[str, float]:
    """The server's refusals by reason (``jaxplay_rejected_runs_total``)."""
    text = httpx.get(url + "/metrics", timeout=30).text
    return {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith('jaxplay_rejected_runs_total{reason="')
    }


async def sample(pid: int, samples: list[int], tree: TreeCPU, stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append(memory(pid)[0])
        tree.sample()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)


def pct(values: list[float], q: float) -> float:
    """The ``q``th percentile (0 to 100); nan when no request got that far."""
    return percentile(values, q / 100) if values else float("nan")


def pool_figures(url: str) -> dict[str, float]:
    """The pool's own figures (``jaxplay_pool{figure=...}`` on /metrics)."""
    text = httpx.get(url + "/metrics", timeout=30).text
    figures = {}
    for line in text.splitlines():
        if line.startswith('jaxplay_pool{figure="'):
            figures[line.split('"')[1]] = float(line.rsplit(" ", 1)[1])
    return figures


async def warm_up(ws_url: str) -> None:
    """One run first, so the server has imported what it needs and knows its worker."""
    async with websockets.connect(f"{ws_url}?token=load-0", open_timeout=30) as ws:
        await ws.recv()
        body = request_for(999, 0, False)
        await ws.send(json.dumps({"type": "run", "seq": 0, "payload": body}))
        while json.loads(await asyncio.wait_for(ws.recv(), 180))["payload"].get("type") != "done":
            pass


async def establish(ws_url: str, url: str, args: argparse.Namespace) -> float:
    """Every client's first run, all at once, before the measured window (each run
    refused with 429/503 sent again after its Retry-After, as in the window): the
    window then measures sessions that exist (their edits), not their arrival, which
    is benchmarks/pool/new_jail.py's "new visitors". Seconds until the last was
    served; a failure among them ends the benchmark."""
    started = time.monotonic()
    deadline, tally = started + 600, Tally()
    await asyncio.gather(
        *(one_client(ws_url, i, args, tally, deadline, 1, 0) for i in range(args.clients)),
        *(one_script(url, i, args, tally, deadline, 1, 0) for i in range(args.scripts)),
    )
    served = sum(tally.statuses.values())
    if tally.failures or served < args.clients + args.scripts:
        raise SystemExit(
            f"{served} of {args.clients + args.scripts} clients had their first run: "
            f"{tally.failures[:3]}"
        )
    return time.monotonic() - started


async def load(args: argparse.Namespace, url: str, pid: int | None) -> dict[str, Any]:
    ws_url = url.replace("http", "ws", 1) + "/api/v1/ws"
    if args.warmup:
        await warm_up(ws_url)
        await asyncio.sleep(args.settle)  # the pool's spare starts again
    established_s = await establish(ws_url, url, args) if args.establish else None
    tally = Tally()
    samples: list[int] = []
    stop = asyncio.Event()
    tree = TreeCPU(pid) if pid else None
    sampler = asyncio.create_task(sample(pid, samples, tree, stop)) if pid and tree else None
    server_cpu = cpu_s(pid) if pid else 0.0
    busy = machine_busy_s()
    before, refusals = pool_figures(url), rejected(url)
    own_cpu = time.process_time()
    started = time.monotonic()
    end = started + args.duration
    await asyncio.wait_for(
        asyncio.gather(
            *(one_client(ws_url, i, args, tally, end) for i in range(args.clients)),
            *(one_script(url, i, args, tally, end) for i in range(args.scripts)),
        ),
        args.duration + args.run_timeout + 30,
    )
    wall = time.monotonic() - started
    own_cpu = time.process_time() - own_cpu
    busy = machine_busy_s() - busy
    if tree is not None:
        tree.sample()
    tree_cpu = tree.seconds() if tree is not None else {}
    stop.set()
    if sampler:
        await sampler
    after = pool_figures(url)
    health = httpx.get(url + "/healthz", timeout=5).json()
    completed = len(tally.latency_s)
    result: dict[str, Any] = {
        "clients": args.clients,
        "established_first_runs_s": None if established_s is None else round(established_s, 1),
        "duration_s": args.duration,
        "completed": completed,
        "completed_per_s": round(completed / args.duration, 2),
        "completed_after_the_duration": tally.late,
        "statuses": tally.statuses,
        "cached": tally.cached,
        "refused": dict(sorted(tally.refused.items(), key=lambda kv: -kv[1])),
        "refused_by_reason_on_the_server": {
            k: v - refusals.get(k, 0) for k, v in rejected(url).items() if v > refusals.get(k, 0)
        },
        "failures": len(tally.failures),
        "failure_examples": tally.failures[:5],
        "latency_ms": {f"p{q}": round(pct(tally.latency_s, q) * 1000, 1) for q in (50, 95, 99)},
        # as a person waits: refusals and their Retry-After included, unserved ones too
        "wait_ms": {
            f"p{q}": round(pct([w for v in tally.waits_s.values() for w in v], q) * 1000, 1)
            for q in (50, 95, 99)
        },
        "first_jaxpr_ms": {
            f"p{q}": round(pct(tally.first_jaxpr_s, q) * 1000, 1) for q in (50, 95, 99)
        },
        # issue 52: p99 <= 3x p50 (to the first jaxpr)
        "first_jaxpr_p99_over_p50": round(
            pct(tally.first_jaxpr_s, 99) / pct(tally.first_jaxpr_s, 50), 2
        )
        if tally.first_jaxpr_s
        else None,
        "fairness": fairness(tally, args.clients + args.scripts),
        "refusals_without_retry_after": tally.no_retry_after,
        # this script's clients run on the same CPUs as the server
        "load_generator_cpu_s_per_completed_run": round(own_cpu / max(1, completed), 4),
        # all the machine's work (other people's too) against what this server did
        "machine_cpu_busy": f"{busy / wall / len(os.sched_getaffinity(0)):.0%} of its CPUs",
        "pool": {
            k: after.get(k, 0) - before.get(k, 0) if k in ("runs", "reused", "retired") else v
            for k, v in after.items()
        },
        "server_jax_imported": health.get("jax_imported"),
    }
    if pid:
        rss, hwm = memory(pid)
        maps = Path(f"/proc/{pid}/maps").read_text()
        result.update(
            server_cpu_s_per_completed_run=round(
                (cpu_s(pid) - server_cpu) / max(1, completed + tally.late), 4
            ),
            # the server, its jails, zygotes and runs: what a completed run cost in all
            server_and_jails_cpu_s_per_completed_run=round(
                sum(tree_cpu.values()) / max(1, completed + tally.late), 4
            ),
            server_and_jails_cpu_s_per_completed_run_by_kind={
                k: round(v / max(1, completed + tally.late), 4) for k, v in tree_cpu.items()
            },
            server_and_jails_cpu_share=(
                f"{sum(tree_cpu.values()) / wall / len(os.sched_getaffinity(0)):.0%} of the CPUs"
            ),
            server_rss_mb_max_sampled=round(max(samples, default=rss) / 2**20, 1),
            server_peak_rss_mb=round(hwm / 2**20, 1),
            server_maps_jaxlib="jaxlib" in maps or "xla_extension" in maps,
        )
    return result


def start_server(args: argparse.Namespace, workdir: Path) -> LiveServer:
    tokens = [f"load-{i}" for i in range(args.clients)] + [
        f"script-{i}" for i in range(args.scripts)
    ]
    env = {
        "JAXPLAY_API_TOKENS": json.dumps(tokens),
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",  # the machine's throughput, not a policy's
    }
    extra = [] if args.pool in ("zygote", "auto", "fake") else ["--unsafe-no-jail"]
    return LiveServer(workdir / "load.sqlite3", "--pool", args.pool, *extra, env=env).start(180)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="a running server (default: start one on a free port)")
    parser.add_argument("--pid", type=int, help="the running server's pid, for its memory")
    parser.add_argument("--pool", default="auto", help="the pool of the server this script starts")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument(
        "--scripts", type=int, default=0, help="REST scripts beside the pages (issue 52: 16)"
    )
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    parser.add_argument(
        "--warm-runs", type=int, default=20, help="runs timed in the warm process (0: skip)"
    )
    parser.add_argument("--cache", action="store_true", help="the same code everywhere")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false")
    parser.add_argument(
        "--no-establish",
        dest="establish",
        action="store_false",
        help="measure from the clients' arrival (each client's first run, a new jail, in the window)",
    )
    parser.add_argument(
        "--settle", type=float, default=3.0, help="seconds after the warm-up run (a spare starts)"
    )
    parser.add_argument(
        "--run-timeout", type=float, default=120.0, help="longest wait for one run's next message"
    )
    parser.add_argument("--max-rss-mb", type=float, default=120.0)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--warm-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warm_child is not None:
        warm_main(args.warm_child)
        return

    cpus = len(os.sched_getaffinity(0))
    load_avg = os.getloadavg()
    warm: list[float] = measure_warm(args.warm_runs) if args.warm_runs else []
    server = None
    with tempfile.TemporaryDirectory(prefix="jaxplay-load-") as workdir:
        try:
            if args.url:
                url, pid = args.url.rstrip("/"), args.pid
            else:
                server = start_server(args, Path(workdir))
                url, pid = server.url, server.pid
            result = asyncio.run(load(args, url, pid))
        finally:
            if server is not None:
                server.stop(timeout_s=30)
    result["cpus"] = cpus
    result["load_average_at_start"] = [round(x, 1) for x in load_avg]
    result["load_average_at_end"] = [round(x, 1) for x in os.getloadavg()]
    if warm:
        per_run = statistics.median(warm)
        capacity = cpus / per_run
        result["warm_process_cpu_s_per_run"] = spread(warm, 4)
        result["capacity_runs_per_s"] = round(capacity, 1)
        result["completed_over_capacity"] = round(result["completed_per_s"] / capacity, 3)
    result["ok"] = (
        result["failures"] == 0
        and result["refusals_without_retry_after"] == 0
        and not result["server_jax_imported"]
        and not result.get("server_maps_jaxlib", False)
        and result.get("server_peak_rss_mb", 0) <= args.max_rss_mb
    )
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key, value in result.items():
            print(f"{key:34} {value}")
        if warm:
            print(
                f"\n{result['completed_per_s']} runs/s completed with {args.clients} clients; "
                f"the machine's capacity {cpus} CPUs / {per_run:.3f} CPU-s = "
                f"{result['capacity_runs_per_s']} runs/s; ratio "
                f"{result['completed_over_capacity']:.2f} (target >= 0.8)"
            )
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
