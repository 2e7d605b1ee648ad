"""What pristine runs cost, and what one client flooding them costs everyone else
(backend/app/trust/confirm.py, backend/app/trust/pristine_lines.py).

Starts ``jaxplay serve`` on the jailed warm pool three times — pristine runs off,
on, and on while one client floods shares of slow candidates — and in each, on the
same N fresh requests (the page's default example, a new comment each), with every
client at an address of its own (``X-Forwarded-For`` from a trusted proxy: the
server's client groups are addresses):

- **edit loop**: the author's page session edits and runs N times (its own re-runs
  never ask for a pristine run): median ms per run;
- **first reader**: a second client asks for each of the author's requests (a
  popular request's second visitor): it asks for the pristine run and runs at once
  (it never waits for a pristine run in line): median ms until its answer;
- **time to confirmed**: from the first reader's request until the request is first
  served from the cache to a later reader (a third client asking once a second):
  median s.
  The flood's target is at most 2x the unflooded figure;
- **reader waits**: the share of the readers' requests (the first, and the later
  ones that come once a second until one is served from the cache) that waited for
  pristine work (``jaxplay_cache_lookups_total{result="joined"}``: a request joins
  only a pristine run that is already running);
- **CPU per newly confirmed key**: the CPU-seconds of the server and every process
  under it (its jails and their starts, reaped ones included; /proc/PID/stat) from
  the first reader's request until the key was first served confirmed and 5 s more
  (the spare the pristine run used is started again meanwhile), median over N; with
  pristine runs off, the first reader's run and the same 5 s. (Not measured under the
  flood: the flood's own runs count there.)

The flood: one client (one address, three page sessions) runs K candidates whose
code sleeps ``--flood-sleep`` s (a pristine run of each costs that long) and shares
them all, as fast as the server takes them (it is refused past its group's cap and
budget of pristine time), before and while the N readers come.

    .venv/bin/python benchmarks/server/pristine_cost.py [--n 6] [--flood 12] [--json]

Run it on a quiet machine: the CPU figure counts everything the machine does.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.support import procfs  # noqa: E402
from tests.support.live_server import LiveServer  # noqa: E402

EXAMPLE = (ROOT / "examples" / "grad_of_loss.py").read_text()
REQUEST: dict[str, Any] = {
    "args": "(jnp.ones((3,)),)",
    "transforms": [{"name": "grad"}, {"name": "jit"}],
    "outputs": ["jaxpr", "stablehlo", "hlo", "value", "cost"],
    "timeout_s": 60,
}


def server_cpu_seconds(server: LiveServer) -> float:
    """CPU time of the server and every process under it (its jails and their
    starts), reaped children included: what this server costs, not the machine."""
    total = 0
    for pid in [server.pid, *server.descendants()]:
        try:
            fields = procfs.stat_fields(pid)
        except (OSError, IndexError):
            continue
        total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return total / procfs.TICK


def timed(client: httpx.Client, body: dict[str, Any]) -> tuple[float, list[dict[str, Any]]]:
    started = time.perf_counter()
    r = client.post("/api/v1/runs", json=body)
    elapsed = (time.perf_counter() - started) * 1000
    r.raise_for_status()
    events: list[dict[str, Any]] = r.json()["events"]
    assert events[-1]["status"] == "ok", events[-1]
    return elapsed, events


class Client:
    """A client at an address of its own (``X-Forwarded-For``, believed from the
    loopback proxy), with its page session."""

    def __init__(self, server: LiveServer, address: str) -> None:
        self.http = httpx.Client(
            base_url=server.url, timeout=300, headers={"X-Forwarded-For": address}
        )
        self.http.get("/")  # the page's session cookie

    def run(self, body: dict[str, Any]) -> tuple[float, list[dict[str, Any]]]:
        return timed(self.http, body)


def metric(server: LiveServer, name: str, label: str) -> float:
    text = httpx.get(server.url + "/metrics", timeout=30).text
    found = re.search(re.escape(name) + r"\{[a-z]+=\"" + re.escape(label) + r'"\} ([\d.e+]+)', text)
    return float(found.group(1)) if found else 0.0


def wait_confirmed(server: LiveServer, at_least: float, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while metric(server, "jaxplay_pristine_runs_total", "confirmed") < at_least:
        if time.monotonic() > deadline:
            raise TimeoutError("no pristine run confirmed the key")
        time.sleep(0.05)


#: after each key, the wait before its CPU is read: the spare a pristine run used is
#: started again meanwhile (its start is the pristine run's cost), in both modes alike
SETTLE_S = 5.0
FLOOD_CODE = "import time\ntime.sleep({sleep})\n\ndef f():\n    return 0.0\n# flood {tag}\n"


def flood(
    server: LiveServer, k: int, sleep_s: float, stop: threading.Event, made: threading.Event
) -> dict[str, int]:
    """One client's shares of ``k`` slow candidates of its own, two at a time (its
    address's cap on runs), each shared once made; then it shares them again and
    again until ``stop``, as a client keeping the line full would."""
    sessions = [Client(server, "203.0.113.66") for _ in range(3)]
    counts = {"runs": 0, "shares": 0}
    bodies = [
        {"code": FLOOD_CODE.format(sleep=sleep_s, tag=uuid.uuid4().hex), "outputs": ["value"],
         "timeout_s": sleep_s + 30}
        for _ in range(k)
    ]  # fmt: skip

    def make(i: int) -> None:
        me = sessions[i % len(sessions)]
        while (r := me.http.post("/api/v1/runs", json=bodies[i])).status_code in (429, 503):
            time.sleep(float(r.headers.get("retry-after", "1")))  # as a client would
        r.raise_for_status()
        counts["runs"] += 1
        me.http.post("/api/v1/snippets", json=bodies[i])
        counts["shares"] += 1

    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(make, range(k)))
    finally:
        made.set()
    while not stop.is_set():
        for i, body in enumerate(bodies):
            sessions[i % len(sessions)].http.post("/api/v1/snippets", json=body)
            counts["shares"] += 1
        stop.wait(3.0)
    return counts


def measure(
    n: int, mode: str, flood_k: int, flood_sleep_s: float, logs: Path | None = None
) -> dict[str, Any]:
    env = {
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
        "JAXPLAY_SNIPPET_RATE_PER_MINUTE": "0",
        "JAXPLAY_PRISTINE_CONCURRENCY": "0" if mode == "off" else "2",
        "JAXPLAY_CACHE_JOIN_WAIT_S": "120",
        "JAXPLAY_QUEUE_TIMEOUT_S": "120",
        "JAXPLAY_TRUSTED_PROXIES": '["127.0.0.1"]',
    }
    with tempfile.TemporaryDirectory() as tmp:
        log = logs / f"server-{mode}.log" if logs is not None else None
        if log is not None:
            env["JAXPLAY_LOG_LEVEL"] = "info"  # the pristine runs' starts and waits
        server = LiveServer(
            Path(tmp) / "jaxplay.sqlite3", "--pool", "zygote", env=env, log=log
        ).start()
        stop = threading.Event()
        flooder: Future[dict[str, int]] | None = None
        executor = ThreadPoolExecutor(1)
        try:
            author = Client(server, "198.51.100.1")
            reader = Client(server, "198.51.100.2")
            later = Client(server, "198.51.100.3")
            bodies = [
                {"code": EXAMPLE + f"# edit {uuid.uuid4().hex}\n", **REQUEST} for _ in range(n)
            ]
            warm = {**bodies[0], "code": EXAMPLE + "# warm\n", "cache": False}
            for client in (author, reader, later):
                client.run(warm)  # each client's jail
            if mode == "flood":
                made = threading.Event()
                flooder = executor.submit(flood, server, flood_k, flood_sleep_s, stop, made)
                made.wait()  # its candidates are made (its runs took the places meanwhile)
            time.sleep(3)  # the spares the first runs took are started again
            edits = [author.run(body)[0] for body in bodies]
            time.sleep(3)
            joined0 = metric(server, "jaxplay_cache_lookups_total", "joined")
            first_ms, to_confirmed_s, cpu_per_key, later_cached, readers = [], [], [], 0, 0
            for body in bodies:
                cpu0, t0 = server_cpu_seconds(server), time.perf_counter()
                ms, _ = reader.run(body)
                first_ms.append(ms)
                readers += 1
                if mode == "off":
                    time.sleep(SETTLE_S)
                    cpu_per_key.append(server_cpu_seconds(server) - cpu0)
                    continue
                # later readers come, one a second, until one is served from the cache
                while True:
                    _, events = later.run(body)
                    readers += 1
                    if events[0].get("cached"):
                        break
                    if time.perf_counter() - t0 > 600:
                        raise TimeoutError("the request was never served confirmed")
                    time.sleep(1.0)
                to_confirmed_s.append(time.perf_counter() - t0)
                time.sleep(SETTLE_S)
                cpu_per_key.append(server_cpu_seconds(server) - cpu0)
                later_cached += 1
            joined = metric(server, "jaxplay_cache_lookups_total", "joined") - joined0
            row: dict[str, Any] = {
                "mode": mode,
                "n": n,
                "edit_ms": statistics.median(edits),
                "first_reader_ms": statistics.median(first_ms),
                "to_confirmed_s": statistics.median(to_confirmed_s) if to_confirmed_s else None,
                "to_confirmed_each_s": [round(s, 2) for s in to_confirmed_s],
                "later_reader_cached": later_cached,
                "readers": readers,
                "reader_wait_share": joined / readers,
                "cpu_s_per_key": statistics.median(cpu_per_key) if mode != "flood" else None,
            }
            if flooder is not None:
                stop.set()
                row["flood"] = flooder.result()
                text = httpx.get(server.url + "/metrics", timeout=30).text
                row["pristine_outcomes"] = dict(
                    re.findall(r'jaxplay_pristine_runs_total\{outcome="(\w+)"\} ([\d.]+)', text)
                )
            return row
        finally:
            stop.set()
            executor.shutdown(wait=True, cancel_futures=True)
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=6, help="fresh requests per mode")
    parser.add_argument("--flood", type=int, default=12, help="the flooding client's candidates")
    parser.add_argument("--flood-sleep", type=float, default=8.0, help="each one's sleep, s")
    parser.add_argument("--modes", default="off,on,flood")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--logs", type=Path, help="keep each server's log in this folder")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
    rows = [measure(args.n, mode, args.flood, args.flood_sleep, args.logs) for mode in modes]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'':32}" + "".join(f"{'pristine ' + m:>16}" for m in modes))
    for key, label in (
        ("edit_ms", "edit loop, median ms"),
        ("first_reader_ms", "first reader, median ms"),
        ("to_confirmed_s", "time to confirmed, median s"),
        ("later_reader_cached", "  later readers cached"),
        ("readers", "reader requests"),
        ("reader_wait_share", "  share that waited"),
        ("cpu_s_per_key", "CPU-s per key (1st reader)"),
    ):
        cells = []
        for row in rows:
            v = row[key]
            cells.append(
                f"{'-':>16}" if v is None else f"{v:>16.2f}" if isinstance(v, float) else f"{v:>16}"
            )
        print(f"{label:32}" + "".join(cells))
    for row in rows:
        print(f"{row['mode']}: each key's time to confirmed, s: {row['to_confirmed_each_s']}")
        if "flood" in row:
            print(f"flood: {row['flood']}; pristine outcomes: {row['pristine_outcomes']}")


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
