"""Issue 47's figures: what a new jail costs the people who need one, with each
zygote's jail a new bubblewrap and interpreter (``JAXPLAY_FORK_JAILS=0``, "exec")
and forked from its JAX version's template (``=1``, "fork"), side by side in one run.

Two real ``jaxplay serve`` on the jailed warm pool with its default settings (the
machine's spares), one per mode, both up the whole time; each measurement is taken on one, then
the other (who goes first alternates), so a busy machine weighs on both alike. The
runs' limits are off (``JAXPLAY_RATE_LIMIT_PER_MINUTE=0``, snippets too: the
benchmark sends more than a person would) and the loopback is a trusted proxy, so
each client can be an address of its own (``X-Forwarded-For``, as
benchmarks/server/pristine_cost.py). Every run's code is new (a comment), so no answer
comes from the result cache unless the row says so.

- **CLI loop**: 5 invocations of ``jaxplay run FILE --server URL`` (the console
  script, a process each, the file edited between them: a person's loop), with the
  session it keeps (issue 47's item 2; a cache folder of its own per mode, so the
  first invocation asks for it) and with ``--no-session`` (single-use: a new jail
  each), against ``python FILE`` printing the same with plain JAX in a fresh process
  (ratio of the medians: the issue's target is <= 0.5; plain Python's n runs before
  the CLI rows and n after them, together).
- **REST, no cookie, no token**: 6 edits of a small grad+jit snippet, one after the
  other: median ms (each a single-use jail); beside it the same with a session.
- **Eight new visitors at once**: eight addresses, each opens the page (its session
  cookie) and sends its first run at the same moment: each one's ms to ``done``, the
  last one's the figure (target <= 2 s).
- **Link readers**: a link whose code prints a fresh random draw (so no answer of it is
  ever confirmed, and its code is single-use on a reader's page), opened by five
  readers one after the other, each at an address of its own, over the page's
  WebSocket with ``?link=``: median ms from the run frame to ``done`` (target <= 300).
- **Pristine confirmations**: an author's session leaves K candidates, then shares
  them all at once (a share asks for a pristine run): confirmations per second until
  all K are confirmed.
- **One new jail**, at the pool level: benchmarks/pool/jail_start.py (the lead's, run as a
  child with the same N): ms from the ask to the zygote's hello with its warm child,
  and the CPU-s of the jail's processes.

    .venv/bin/python benchmarks/pool/new_jail.py [--cli 5] [--rest 6] [--visitors 8]
        [--readers 5] [--pristine 6] [--jails 5] [--json FILE]

On a busy machine take the ratios; the absolute figures want a quiet one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import websockets

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.server.pristine_cost import Client, metric  # noqa: E402
from benchmarks.support import reproduce, stats  # noqa: E402
from tests.support.live_server import LiveServer  # noqa: E402

MODES = {"exec": "0", "fork": "1"}
EXAMPLE = (ROOT / "examples" / "grad_of_loss.py").read_text()
ARGS = "(jnp.ones((3,)),)"
BODY: dict[str, Any] = {
    "args": ARGS,
    "transforms": [{"name": "grad"}, {"name": "jit"}],
    "outputs": ["jaxpr", "value"],
    "timeout_s": 60,
}
#: the file both the CLI and plain Python run: jaxplay never runs the __main__ block
#: (its code is no script's main); ``python FILE`` prints what the CLI shows
PLAIN_MAIN = """
if __name__ == "__main__":
    import jax

    g = jax.jit(jax.grad(f))
    print(jax.make_jaxpr(g)(jnp.ones((3,))))
    print(jax.block_until_ready(g(jnp.ones((3,)))))
"""
#: a link's code that no two runs agree on: never confirmed, single-use on its page
LINK_CODE = EXAMPLE + "\nimport os\nprint(os.urandom(4).hex())\n"
CLI = [str(Path(sys.executable).with_name("jaxplay"))]


#: the line an edit changes: the loss's scale, so that each edit is a new program (its
#: jaxpr, HLO and value all differ) and nothing of it comes from a cache, in-process or
#: on disk (a kept process's compilation cache would load an unchanged program)
EDITED = "return jnp.mean((pred - Y) ** 2)"


def edit(code: str) -> str:
    assert EDITED in code, "the example no longer has the line an edit changes"
    scale = 1 + random.randrange(1, 10**6) / 10**7
    return code.replace(EDITED, f"{EDITED} * {scale!r}") + f"\n# edit {uuid.uuid4().hex}\n"


def spread(values: list[float]) -> dict[str, Any]:
    return {**stats.spread(values, 3), "each": [round(v, 3) for v in values]}


def wait_spare(server: LiveServer, timeout_s: float = 300.0, *, all_wanted: bool = False) -> None:
    """Until the pool has a ready spare again (a new visitor's run would find one), or
    with ``all_wanted`` every spare it keeps (none is being made)."""
    deadline = time.monotonic() + timeout_s
    while metric(server, "jaxplay_pool", "spares") < (
        max(1, metric(server, "jaxplay_pool", "spares_wanted")) if all_wanted else 1
    ):
        if time.monotonic() > deadline:
            raise TimeoutError("the pool's spare did not start again")
        time.sleep(0.1)


def settle(*servers: LiveServer) -> None:
    for server in servers:  # none is making a spare: its CPU is not the next row's
        wait_spare(server, all_wanted=True)
    time.sleep(1.0)


# --- the rows -------------------------------------------------------------------------


def cli_loop(server: LiveServer, n: int, tmp: Path, *flags: str) -> list[float]:
    """``jaxplay run FILE --server URL`` n times, the file edited before each: seconds."""
    cache = tmp / f"xdg-{server.port}-{'-'.join(flags) or 'session'}"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    file = tmp / "loop.py"
    times = []
    for _ in range(n):
        file.write_text(edit(EXAMPLE) + PLAIN_MAIN)
        argv = [*CLI, "run", str(file), "--args", ARGS, "--transform", "grad",
                "--transform", "jit", "--output", "jaxpr", "--output", "value",
                *flags, "--server", server.url]  # fmt: skip
        t = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
        times.append(time.perf_counter() - t)
        if proc.returncode != 0:
            raise RuntimeError(f"jaxplay run failed: {proc.stderr[-2000:]}")
    return times


def plain_loop(n: int, tmp: Path) -> list[float]:
    """``python FILE`` with plain JAX in a fresh process, n times: seconds."""
    file = tmp / "plain.py"
    times = []
    for _ in range(n):
        file.write_text(edit(EXAMPLE) + PLAIN_MAIN)
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, str(file)], capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        if proc.returncode != 0 or "lambda" not in proc.stdout:
            raise RuntimeError(f"python FILE failed: {proc.stderr[-2000:]}")
    return times


def rest_loop(server: LiveServer, n: int, *, session: bool) -> list[float]:
    """n edits over REST, one after the other, with neither cookie nor token (or with
    an API session): ms each."""
    with httpx.Client(base_url=server.url, timeout=300) as c:
        if session:
            assert c.post("/api/v1/sessions").status_code == 201
        times = []
        for _ in range(n):
            t = time.perf_counter()
            r = c.post("/api/v1/runs", json={**BODY, "code": edit(EXAMPLE)})
            times.append((time.perf_counter() - t) * 1000)
            r.raise_for_status()
            assert r.json()["events"][-1]["status"] == "ok", r.json()["events"][-1]
    return times


def visitors(server: LiveServer, n: int) -> dict[str, Any]:
    """n new visitors, each its own address, send their first run at one moment: ms
    each from that moment to its ``done``, sorted; a 503 (every place held) is asked
    again after its ``Retry-After``, as the page does, and counted."""
    clients = [Client(server, f"198.51.100.{100 + i}") for i in range(n)]
    start = threading.Barrier(n)
    times: list[float] = []
    refused = [0]

    def go(client: Client) -> None:
        body = {**BODY, "code": edit(EXAMPLE)}
        start.wait()
        t = time.perf_counter()
        while (r := client.http.post("/api/v1/runs", json=body)).status_code in (429, 503):
            refused[0] += 1
            time.sleep(float(r.headers.get("retry-after", "1")))
        r.raise_for_status()
        assert r.json()["events"][-1]["status"] == "ok", r.json()["events"][-1]
        times.append((time.perf_counter() - t) * 1000)

    threads = [threading.Thread(target=go, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.http.close()
    return {**spread(sorted(times)), "refused": refused[0]}


async def _ws_run(
    server: LiveServer, address: str, cookie: str, body: dict[str, Any], link: str
) -> float:
    url = server.url.replace("http", "ws") + f"/api/v1/ws?link={link}"
    headers = {"X-Forwarded-For": address, "Cookie": cookie}
    async with websockets.connect(url, additional_headers=headers, max_size=2**24) as ws:
        assert json.loads(await ws.recv())["type"] == "hello"
        t = time.perf_counter()
        await ws.send(json.dumps({"type": "run", "seq": 1, "payload": body}))
        while True:
            m = json.loads(await asyncio.wait_for(ws.recv(), 300))
            if m["type"] == "event" and m["payload"]["type"] == "done":
                assert m["payload"]["status"] == "ok", m
                return (time.perf_counter() - t) * 1000


def link_readers(server: LiveServer, n: int) -> list[float]:
    """A link whose answer is never confirmed, read by n readers one after the other,
    each at its own address: ms from the run frame to ``done``."""
    body = {**BODY, "code": edit(LINK_CODE)}
    author = Client(server, "203.0.113.10")
    made = author.http.post("/api/v1/snippets", json=body)
    made.raise_for_status()
    link = made.json()["id"]
    times = []
    for i in range(n):
        reader = Client(server, f"203.0.113.{20 + i}")
        reader.http.get(f"/s/{link}").raise_for_status()  # the page it opened
        cookie = "; ".join(f"{k}={v}" for k, v in reader.http.cookies.items())
        times.append(asyncio.run(_ws_run(server, f"203.0.113.{20 + i}", cookie, body, link)))
        reader.http.close()
    return times


def pristine_rate(server: LiveServer, k: int) -> dict[str, float]:
    """Confirmations per second: k candidates by one author, then all shared at once."""
    author = Client(server, "192.0.2.10")
    bodies = [{**BODY, "code": edit(EXAMPLE)} for _ in range(k)]
    for body in bodies:
        author.run(body)  # the candidate
    settle(server)
    before = metric(server, "jaxplay_pristine_runs_total", "confirmed")
    t = time.perf_counter()
    for body in bodies:
        author.http.post("/api/v1/snippets", json=body).raise_for_status()
    deadline = t + 600
    while metric(server, "jaxplay_pristine_runs_total", "confirmed") < before + k:
        if time.perf_counter() > deadline:
            raise TimeoutError("the shared candidates were not all confirmed")
        time.sleep(0.05)
    elapsed = time.perf_counter() - t
    # (no CPU figure here: the server's process tree loses the CPU of jails retired
    # meanwhile; one jail's CPU is jail_start.py's row)
    return {"per_s": round(k / elapsed, 3), "s": round(elapsed, 2)}


def jail_start(n: int) -> dict[str, Any]:
    """benchmarks/pool/jail_start.py's figures (a child: its pools are its own)."""
    script = ROOT / "benchmarks" / "pool" / "jail_start.py"
    if not script.exists():
        return {"missing": str(script)}
    proc = subprocess.run(
        [sys.executable, str(script), "--n", str(n), "--json"],
        capture_output=True, text=True, timeout=1800, cwd=ROOT,
    )  # fmt: skip
    if proc.returncode != 0:  # the rows above stand without it; say why it is missing
        return {"failed": proc.stderr[-3000:]}
    found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


# --- the run --------------------------------------------------------------------------


def both(
    servers: dict[str, LiveServer], turn: int, label: str, measure: Callable[[LiveServer], Any]
) -> dict[str, Any]:
    """``measure`` on each mode's server, the first alternating by ``turn``."""
    order = list(servers) if turn % 2 == 0 else list(reversed(servers))
    out = {}
    for mode in order:
        # both settled: the other mode's spare, refilled after its own measurement (a
        # new interpreter's 2-3 CPU-s in exec mode), must not share the CPUs with this one
        settle(*servers.values())
        print(f"new_jail: {mode}: {label}", file=sys.stderr, flush=True)
        out[mode] = measure(servers[mode])
    return {m: out[m] for m in servers}


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = {
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
        "JAXPLAY_SNIPPET_RATE_PER_MINUTE": "0",
        "JAXPLAY_QUEUE_TIMEOUT_S": "300",
        "JAXPLAY_TRUSTED_PROXIES": '["127.0.0.1"]',
        # the row measures how many confirmations the machine makes a second: one
        # author's candidates all shared at once, past JAXPLAY_PRISTINE_PER_GROUP (4)
        # the fairness cap would refuse the rest and they would never be confirmed
        "JAXPLAY_PRISTINE_PER_GROUP": str(max(4, args.pristine)),
    }
    result: dict[str, Any] = {"load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        servers = {}
        try:
            for mode, fork in MODES.items():
                servers[mode] = LiveServer(
                    tmp / f"{mode}.sqlite3", "--pool", "zygote",
                    env={**env, "JAXPLAY_FORK_JAILS": fork},
                )  # fmt: skip
                servers[mode].start()
            for server in servers.values():  # each pool's first jail (a template's start)
                rest_loop(server, 1, session=False)
            n = args.cli
            # each row measured on both servers (the first alternating); a count of 0 skips it
            rows: list[tuple[str, int, Callable[[LiveServer], Any]]] = [
                ("cli_session_s", n, lambda s: spread(cli_loop(s, n, tmp))),
                ("cli_single_use_s", n, lambda s: spread(cli_loop(s, n, tmp, "--no-session"))),
                ("rest_ms", args.rest, lambda s: spread(rest_loop(s, args.rest, session=False))),
                (
                    "rest_session_ms",
                    args.rest,
                    lambda s: spread(rest_loop(s, args.rest, session=True)),
                ),
                ("visitors_ms", args.visitors, lambda s: visitors(s, args.visitors)),
                ("readers_ms", args.readers, lambda s: spread(link_readers(s, args.readers))),
                ("pristine", args.pristine, lambda s: pristine_rate(s, args.pristine)),
            ]
            plain = plain_loop(n, tmp) if n else []  # before the CLI rows, and again after
            for turn, (key, count, measure) in enumerate(rows):
                if count:
                    result[key] = both(servers, turn, key, measure)
                if key == "cli_single_use_s" and n:
                    result["plain_s"] = spread(plain + plain_loop(n, tmp))
        finally:
            for server in servers.values():
                server.stop()
    if args.jails:
        result["jail"] = jail_start(args.jails)
    result["load_after"] = os.getloadavg()
    return result


def args_visitors(cells: dict[str, Any]) -> int:
    return len(cells["fork"]["each"])


def report(r: dict[str, Any], command: str) -> None:
    def row(label: str, cells: dict[str, Any], unit: str, key: str = "median") -> None:
        e, f = cells["exec"], cells["fork"]
        ev, fv = (e[key], f[key]) if isinstance(e, dict) else (e, f)
        ranges = f"  (exec {e['min']}-{e['max']}, fork {f['min']}-{f['max']})" if "min" in e else ""
        ratio = f"{fv / ev:.3f}" if ev else "-"
        print(f"{label:44}{ev:>10} {fv:>10} {unit:4} fork/exec {ratio}{ranges}")

    print(f"# {command}")
    print(f"# load average before {r['load_before']}, after {r['load_after']}")
    print(f"{'':44}{'exec':>10} {'fork':>10}")
    if "plain_s" in r:
        plain = r["plain_s"]["median"]
        print(f"{'python FILE (plain JAX), median':44}{plain:>10} {plain:>10} s"
              f"     ({r['plain_s']['min']}-{r['plain_s']['max']})")  # fmt: skip
        row("jaxplay run --server, kept session", r["cli_session_s"], "s")
        row("jaxplay run --server --no-session", r["cli_single_use_s"], "s")
        for key, label in (("cli_session_s", "session"), ("cli_single_use_s", "no-session")):
            cells = r[key]
            print(f"{'  ' + label + ' / python FILE':44}"
                  f"{cells['exec']['median'] / plain:>10.2f} {cells['fork']['median'] / plain:>10.2f}"
                  "      (target <= 0.5)")  # fmt: skip
    if "rest_ms" in r:
        row("REST, no cookie nor token, median", r["rest_ms"], "ms")
        row("REST with a session, median", r["rest_session_ms"], "ms")
    if "visitors_ms" in r:
        v = r["visitors_ms"]
        row(f"{args_visitors(v)} visitors at once: the last one's done", v, "ms", "max")
        print(f"{'  each, sorted':44}exec {v['exec']['each']}")
        print(f"{'':44}fork {v['fork']['each']}")
        print(f"{'  refused (503, asked again)':44}"
              f"{v['exec']['refused']:>10} {v['fork']['refused']:>10}")  # fmt: skip
    if "readers_ms" in r:
        row("link readers (single-use), median", r["readers_ms"], "ms")
    if "pristine" in r:
        row("pristine confirmations per second", r["pristine"], "/s", "per_s")
        row("  seconds for all of them", r["pristine"], "s", "s")
    jail = r.get("jail")
    if jail and ("failed" in jail or "missing" in jail):
        print(f"one new jail: benchmarks/pool/jail_start.py gave nothing: {jail}")
    elif jail:
        print("one new jail (benchmarks/pool/jail_start.py):")
        for key in ("ready_ms", "cpu_s", "run_ms"):
            e, f = jail.get(f"exec_{key}"), jail.get(f"fork_{key}")
            if e and f:
                print(f"  {key:42}{e['median']:>10} {f['median']:>10}"
                      f"      (exec {e['min']}-{e['max']}, fork {f['min']}-{f['max']})")  # fmt: skip
        print(
            f"  the fork pool's start (its template's import and check jail), once per JAX "
            f"version: {jail.get('fork_pool_start_s')} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", type=int, default=5, help="jaxplay run invocations per mode")
    parser.add_argument("--rest", type=int, default=6, help="REST edits per mode")
    parser.add_argument("--visitors", type=int, default=8)
    parser.add_argument("--readers", type=int, default=5)
    parser.add_argument("--pristine", type=int, default=6, help="candidates shared at once")
    parser.add_argument("--jails", type=int, default=5, help="jail_start.py's N (0: skip)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    command = reproduce.command()
    result = run(args)
    result["command"] = command
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    report(result, command)


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
