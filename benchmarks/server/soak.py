"""Hours, not minutes (issue 52): ``jaxplay serve`` on PostgreSQL under mixed traffic
for ``--minutes`` (30 by default), with PostgreSQL stopped and started, and killed
with SIGKILL, under it.

What runs (benchmarks/server/soak_traffic.py): page sessions editing over the WebSocket and
sharing now and then, a script over REST, ``jaxplay run --server`` from the command
line, a sharer and readers of its links (a fixed set, confirmed by pristine runs over
time, and a new link a minute, not yet confirmed), MCP tool calls (run, share,
versions), runs across JAX versions when a second one is installed, and bad input —
each person at an address of its own, at a steady pace the machine can carry (the
defaults suit two CPUs; ``--pages`` etc. for a bigger one).

What it samples every ``--sample-s`` (benchmarks/server/soak_trend.py): the server's RSS,
threads and open descriptors; the processes under it (host side, jailed) and the
jails alive, from /proc; the pool's own figures, queue lengths, open WebSockets and runs
in flight (/metrics); PostgreSQL's connections, size and rows; p50/p95 per route
since the sample before; the server's own CPU per second and per answer (and, only
reported, how busy the whole machine was). All printed at the end.

Pass (exit status 0) when:

- no quantity grows: over the last two thirds of the soak the fitted line's rise is
  within 3x its standard error, or under the quantity's floor (soak_trend.py) —
  PostgreSQL's size and rows grow by design (snippets, two days of run figures) and
  are reported, not judged; its bytes per row are judged;
- no run is lost or answered twice: every run sent got exactly one ``done``, last, or
  a clean refusal (429/503 with ``Retry-After``), and no run id came twice;
- nothing is a 500, bad input is answered as docs/api.md says, a storage error comes
  only while a fault step has PostgreSQL down, and says so;
- every snippet made reads back as it was stored, after each fault step and at the
  end; the first share after PostgreSQL is back succeeds; runs ended ``ok`` while it
  was down;
- every answer served from the cache equals a fresh run of its request (``cache:
  false``), compared as the cache compares (its shown events).

Fault steps (``--faults``, kind@fraction of the soak): ``stop`` (``pg_ctl stop -m
fast``, as an operator's restart), ``kill`` (SIGKILL to the postmaster; its start runs
crash recovery); each stays down ``--outage-s`` seconds. ``--stack queue`` runs the
compose stack's shape instead (the server through Redis to a ``jaxplay worker``:
benchmarks/server/soak_stack.py), with two more: ``redis`` (redis-server SIGKILLed) and
``worker`` (the worker SIGKILLed mid-run); a run they end ``killed`` or ``error``,
saying so, is counted, and the next run must work within a minute.

    .venv/bin/python benchmarks/server/soak.py                       # 30 minutes, both faults
    .venv/bin/python benchmarks/server/soak.py --minutes 240 --json soak.json
    .venv/bin/python benchmarks/server/soak.py --minutes 5 --sample-s 10   # a short try
    .venv/bin/python benchmarks/server/soak.py --stack queue               # through Redis and a worker

It needs PostgreSQL (``apt-get install postgresql``; the soak makes a private cluster
under /tmp) and the jail (the default pool). It prints the machine's load at the start
and the end: on a shared machine, the latency trends say as much about the
neighbours as about the server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.server import soak_traffic as traffic  # noqa: E402
from benchmarks.server.soak_stack import FAULTS, RUN_ENDING, Stack  # noqa: E402
from benchmarks.server.soak_trend import Samples, take_sample  # noqa: E402
from benchmarks.support.procfs import cpu_s, machine_busy_s  # noqa: E402
from benchmarks.support.stats import percentile  # noqa: E402
from tests.support.services import Postgres  # noqa: E402

#: how long Redis keeps a finished run's events (the setting's default, not changed here)
EVENTS_TTL_S = 300.0


def parse_faults(text: str, stack: str) -> list[tuple[str, float]]:
    steps = []
    for part in filter(None, text.split(",")):
        kind, _, at = part.partition("@")
        try:
            fraction = float(at)
        except ValueError:
            fraction = math.nan
        if kind not in FAULTS[stack] or not 0 < fraction < 1:
            raise SystemExit(
                f"--faults: {part!r} is not KIND@F with 0 < F < 1, KIND one of {FAULTS[stack]}"
            )
        steps.append((kind, fraction))
    return sorted(steps, key=lambda s: s[1])


WHAT = {
    "stop": "PostgreSQL stopped",
    "kill": "PostgreSQL SIGKILLed",
    "redis": "redis-server SIGKILLed",
    "worker": "the worker SIGKILLed",
}


async def faults(
    soak: traffic.Soak, stack: Stack, steps: list[tuple[str, float]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    done = []
    begin = soak.end - args.minutes * 60
    for kind, at in steps:
        await asyncio.sleep(max(0.0, begin + at * args.minutes * 60 - time.monotonic()))
        if not soak.running():
            break
        step: dict[str, Any] = {"kind": kind, "at_s": round(time.monotonic() - begin)}
        soak.ledger.outages.append([time.monotonic(), 0.0, kind])
        index = len(soak.ledger.outages) - 1
        print(f"  fault: {WHAT[kind]}", flush=True)
        await asyncio.to_thread(stack.fault, kind)
        await asyncio.sleep(args.outage_s)
        restarted = time.monotonic()
        await asyncio.to_thread(stack.undo, kind)
        step["restart_s"] = round(time.monotonic() - restarted, 2)
        soak.ledger.outages[index][1] = time.monotonic()
        step["down_s"] = round(soak.ledger.outages[index][1] - soak.ledger.outages[index][0], 1)
        step["runs_ok_meanwhile"] = soak.ledger.ok_in_outage[index]
        if kind in RUN_ENDING:
            # the next run works (a worker that came back took it)
            step["first_run_after_s"] = await first_run_after(soak, kind)
        else:
            # The first share after it is back must succeed (no broken connection kept).
            async with soak.client("10.52.10.1") as http:
                made = await soak.share(
                    http, f"first share after {kind}", traffic.request_for(kind, index)
                )
            if made is None:
                soak.ledger.fail(f"the first share after PostgreSQL came back ({kind}) was refused")
            if step["runs_ok_meanwhile"] == 0 and args.outage_s >= 10:
                soak.ledger.fail(f"no run ended ok while PostgreSQL was down ({kind})")
        step["snippets_checked"] = await traffic.check_snippets(soak)
        print(f"  fault undone: {step}", flush=True)
        done.append(step)
    return done


async def first_run_after(soak: traffic.Soak, kind: str) -> float | None:
    """Seconds until a run ends ok after ``kind`` was undone (a minute at most)."""
    started = time.monotonic()
    auth = {"Authorization": f"Bearer {traffic.TOOLS_TOKEN}"}
    async with soak.client("10.52.11.1", **auth) as http:
        for n in range(30):
            request = traffic.request_for(f"after {kind}", n, ["jaxpr"])
            if await traffic.rest_run(soak, http, f"first run after {kind}", request, False):
                return round(time.monotonic() - started, 2)
            if time.monotonic() - started > 60:
                break
    soak.ledger.fail(f"no run ended ok within a minute after the {kind} fault was undone")
    return None


async def sampler(soak: traffic.Soak, samples: Samples, stack: Stack, every_s: float) -> None:
    server, pg, database = stack.server, stack.pg, stack.database
    assert server is not None
    cpu, answers, busy, clock = cpu_s(server.pid), 0, machine_busy_s(), time.monotonic()
    while soak.running():
        await asyncio.sleep(min(every_s, max(0.0, soak.end - time.monotonic())))
        window = soak.ledger.take_window()
        seen = await asyncio.to_thread(
            take_sample, samples, server.url, server.pid, server.descendants(),
            (pg.admin_url, database), window,
        )  # fmt: skip
        # The server's own CPU (exact, from /proc): per second, and per answer, which
        # rises if some structure it walks per request grows; the machine's, which
        # says how busy the neighbours kept it, reported only.
        for name, value in (await asyncio.to_thread(stack.extra_sample)).items():
            samples.add(name, value, judged=name != "redis.keys")  # keys: events kept 5 min
            seen[name] = value
        now_cpu, now_answers = cpu_s(server.pid), soak.ledger.counts["answers"]
        now_busy, now = machine_busy_s(), time.monotonic()
        samples.add("cpu.server_share_of_a_cpu", (now_cpu - cpu) / (now - clock))
        if now_answers > answers:
            samples.add(
                "cpu.server_ms_per_answer", 1000 * (now_cpu - cpu) / (now_answers - answers)
            )
        cpus = len(os.sched_getaffinity(0))
        samples.add("cpu.machine_busy", (now_busy - busy) / (now - clock) / cpus, judged=False)
        cpu, answers, busy, clock = now_cpu, now_answers, now_busy, now
        at = time.monotonic() - samples.started
        shown = {k: round(v, 1) for k, v in seen.items()
                 if k in ("server.rss_mb", "server.fds", "jails.alive", "pool.zygotes",
                          "pg.connections", "latency.ws_run.p95_ms")}  # fmt: skip
        print(f"  {at:6.0f} s  {json.dumps(shown)}  failures {soak.ledger.counts['failures']}",
              flush=True)  # fmt: skip


async def soak_main(args: argparse.Namespace, stack: Stack) -> dict[str, Any]:
    server, workdir = stack.server, stack.workdir
    assert server is not None
    ledger = traffic.Ledger()
    soak = traffic.Soak(server.url, ledger, end=time.monotonic() + args.minutes * 60)
    backends = httpx.get(server.url + "/api/v1/backends", timeout=30).json()
    versions = sorted(
        {v["version"] for b in backends.get("backends", []) for v in b.get("versions", [])
         if v.get("installed")}
    )  # fmt: skip
    samples = Samples()
    loops: list[tuple[str, Any]] = [
        *((f"page {i}", lambda i=i: traffic.page_session(soak, i, args.think_s)) for i in range(args.pages)),
        *((f"script {i}", lambda i=i: traffic.script(soak, i, args.script_every_s)) for i in range(args.scripts)),
        ("cli", lambda: traffic.cli(soak, args.cli_every_s, workdir)),
        ("sharer", lambda: traffic.sharer(soak, args.links, args.new_link_every_s)),
        ("reader", lambda: traffic.reader(soak, args.reader_every_s)),
        ("mcp", lambda: traffic.mcp(soak, args.mcp_every_s)),
        ("bad input", lambda: traffic.bad_input(soak, args.bad_every_s)),
    ]  # fmt: skip
    if len(versions) >= 2:
        loops.append(("across", lambda: traffic.across(soak, versions, args.across_every_s)))
    tasks = [asyncio.create_task(traffic.steady(fn, soak, name)) for name, fn in loops]
    watch = asyncio.create_task(sampler(soak, samples, stack, args.sample_s))
    fault_steps = await faults(soak, stack, parse_faults(args.faults, args.stack), args)
    await asyncio.gather(*tasks, watch)
    snippets = await traffic.check_snippets(soak)
    compared = await traffic.check_cached(soak)
    # Redis keeps each run's events JAXPLAY_EVENTS_TTL_S (300 s, the default here)
    # after it: its memory rises that long, then holds (judged after it, a sample on)
    trends = samples.verdicts(args.minutes * 60, {"redis.": EVENTS_TTL_S + args.sample_s})
    health = httpx.get(server.url + "/healthz", timeout=30).json()
    return {
        "stack": args.stack,
        "minutes": args.minutes,
        "versions_installed": versions,
        "across": "on" if len(versions) >= 2 else "off: one JAX version installed",
        "counts": dict(ledger.counts),
        "runs_answered": len(ledger.run_ids),
        "refused": dict(ledger.refused.most_common()),
        "failures": ledger.failures,
        "faults": fault_steps,
        "snippets_checked": snippets,
        "cached_answers_compared_with_fresh_runs": compared,
        "latency_ms": {
            route: {f"p{q}": round(percentile(v, q / 100) * 1000, 1) for q in (50, 95, 99)}
            | {"n": len(v)}
            for route, v in sorted(ledger.latency.items())
        },
        "trends": [t.__dict__ for t in trends],
        "trend_lines": [t.line() for t in trends],
        "reported": {k: [v[0][1], v[-1][1]] for k, v in samples.reported.items() if v},
        "series": {k: v for k, v in {**samples.series, **samples.reported}.items()},
        "server_jax_imported": health.get("jax_imported"),
        "ok": not ledger.failures and all(t.ok for t in trends) and not health.get("jax_imported"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--minutes", type=float, default=30.0, help="how long the traffic runs")
    add("--sample-s", type=float, default=30.0, help="seconds between samples")
    add(
        "--faults",
        help="fault steps, kind@fraction ('' for none; default stop@0.3,kill@0.55, "
        "and with --stack queue also redis@0.7,worker@0.85)",
    )
    add("--outage-s", type=float, default=20.0, help="how long PostgreSQL stays down each time")
    add(
        "--stack",
        choices=sorted(FAULTS),
        default="serve",
        help="serve: one jaxplay serve; queue: the server, Redis and a jaxplay worker",
    )
    add("--pool", default="auto", help="the pool (of the server, or of the worker)")
    add("--pages", type=int, default=3, help="page sessions editing over the WebSocket")
    add("--think-s", type=float, default=4.0, help="a page session's pause between runs")
    add("--scripts", type=int, default=1, help="REST scripts, each with its token")
    add("--script-every-s", type=float, default=6.0)
    add("--cli-every-s", type=float, default=90.0)
    add("--links", type=int, default=6, help="links shared at the start (confirmed over time)")
    add("--new-link-every-s", type=float, default=60.0)
    add("--reader-every-s", type=float, default=6.0)
    add("--mcp-every-s", type=float, default=30.0)
    add("--bad-every-s", type=float, default=10.0)
    add("--across-every-s", type=float, default=120.0)
    add("--cache-entries", type=int, default=300, help="JAXPLAY_CACHE_MAX_ENTRIES")
    add("--json", type=Path, help="write the whole result (with every sample) here")
    args = parser.parse_args()

    if args.faults is None:
        args.faults = "stop@0.3,kill@0.55" + (
            ",redis@0.7,worker@0.85" if args.stack == "queue" else ""
        )
    parse_faults(args.faults, args.stack)  # a bad step is refused before anything starts
    missing = Postgres.missing()
    if missing:
        raise SystemExit(f"the soak needs PostgreSQL: {missing}")
    load_start = os.getloadavg()
    pg = Postgres(durable=True).start()
    log = ""
    with tempfile.TemporaryDirectory(prefix="jaxplay-soak-") as tmp:
        stack = Stack(args.stack, pg, Path(tmp))
        try:
            stack.start(args.pool, args.scripts, args.cache_entries)
            assert stack.server is not None
            print(f"soak: {args.minutes} min against the {args.stack} stack at "
                  f"{stack.server.url} (pid {stack.server.pid}), PostgreSQL on {pg.port}; "
                  f"sampling every {args.sample_s} s", flush=True)  # fmt: skip
            result = asyncio.run(soak_main(args, stack))
        finally:
            stack.stop()
            with contextlib.suppress(OSError):
                log = (Path(tmp) / "server.log").read_text(errors="replace")
    result["cpus"] = len(os.sched_getaffinity(0))
    result["load_average_at_start"] = [round(x, 1) for x in load_start]
    result["load_average_at_end"] = [round(x, 1) for x in os.getloadavg()]
    result["server_log_errors"] = sum(" error " in line for line in log.splitlines())
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=_plain))
    report(result)
    sys.exit(0 if result["ok"] else 1)


def _plain(x: Any) -> Any:
    return None if isinstance(x, float) and math.isnan(x) else str(x)


def report(result: dict[str, Any]) -> None:
    skip = {"trends", "trend_lines", "series", "failures", "latency_ms"}
    for key, value in result.items():
        if key not in skip:
            print(f"{key:40} {value}")
    print("\nlatency (ms, send to answer; ws_first_jaxpr: send to the first jaxpr event):")
    for route, figures in result["latency_ms"].items():
        print(f"  {route:20} {figures}")
    print("\ntrends over the last two thirds:")
    for line in result["trend_lines"]:
        print("  " + line)
    if result["failures"]:
        print(f"\nfailures ({len(result['failures'])}, first 30):")
        for line in result["failures"][:30]:
            print("  " + line)
    print(f"\nsoak: {'PASS' if result['ok'] else 'FAIL'}")


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
