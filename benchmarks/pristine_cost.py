"""What pristine runs cost: the cache's only confirmation (backend/app/confirm.py).

Starts ``jaxplay serve`` on the jailed warm pool twice — pristine runs on (the
default) and off — and, in each, on the same N fresh requests (the page's default
example, a new comment each):

- **edit loop**: one page session edits and runs N times (what a person does at the
  keyboard; its own re-runs never ask for a pristine run): median ms per run;
- **first reader**: a second session then asks for each of the author's requests
  (a popular request's second visitor): with pristine runs on, it waits for the
  pristine run its request asked for and is served the confirmed answer; off, it runs
  the request itself. Median ms until its answer — the delay before a popular request
  is first served from the cache;
- **later readers**: a third session asks again: a cache hit where confirmed;
- **CPU per newly confirmed key**: the machine's CPU-seconds (all processes: server,
  jails, their starts; from /proc/stat) spent while the first readers were answered,
  over N, side by side with the same figure when the reader runs the request itself.

    .venv/bin/python benchmarks/pristine_cost.py [--n 8] [--json]

Run it on a quiet machine: the CPU figure counts everything the machine does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.live_server import LiveServer  # noqa: E402

EXAMPLE = (ROOT / "examples" / "grad_of_loss.py").read_text()
REQUEST: dict[str, Any] = {
    "args": "(jnp.ones((3,)),)",
    "transforms": [{"name": "grad"}, {"name": "jit"}],
    "outputs": ["jaxpr", "stablehlo", "hlo", "value", "cost"],
    "timeout_s": 60,
}


def cpu_seconds() -> float:
    """Busy CPU time of the whole machine so far (user, nice, system, irq, softirq)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def timed(client: httpx.Client, body: dict[str, Any]) -> tuple[float, list[dict[str, Any]]]:
    started = time.perf_counter()
    r = client.post("/api/v1/runs", json=body)
    elapsed = (time.perf_counter() - started) * 1000
    r.raise_for_status()
    events: list[dict[str, Any]] = r.json()["events"]
    assert events[-1]["status"] == "ok", events[-1]
    return elapsed, events


def session(server: LiveServer) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=300)
    client.get("/")  # the page's session cookie
    return client


def measure(n: int, pristine: bool) -> dict[str, Any]:
    env = {
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
        "JAXPLAY_PRISTINE_CONCURRENCY": "1" if pristine else "0",
        "JAXPLAY_CACHE_JOIN_WAIT_S": "120",
        "JAXPLAY_QUEUE_TIMEOUT_S": "120",
    }
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(Path(tmp) / "jaxplay.sqlite3", "--pool", "zygote", env=env).start()
        try:
            author, reader, later = session(server), session(server), session(server)
            bodies = [
                {"code": EXAMPLE + f"# edit {uuid.uuid4().hex}\n", **REQUEST} for _ in range(n)
            ]
            timed(author, {**bodies[0], "code": EXAMPLE + "# warm\n"})  # the author's jail
            timed(reader, {**bodies[0], "code": EXAMPLE + "# warm\n", "cache": False})
            timed(later, {**bodies[0], "code": EXAMPLE + "# warm\n", "cache": False})
            time.sleep(3)  # the spares the first runs took are started again
            edits = [timed(author, body)[0] for body in bodies]
            time.sleep(3)
            cpu0 = cpu_seconds()
            first = [timed(reader, body) for body in bodies]
            cpu_first = cpu_seconds() - cpu0
            hits = [timed(later, body) for body in bodies]
            return {
                "pristine": pristine,
                "n": n,
                "edit_ms": statistics.median(edits),
                "first_reader_ms": statistics.median(ms for ms, _ in first),
                "first_reader_cached": sum(bool(e[0].get("cached")) for _, e in first),
                "later_reader_ms": statistics.median(ms for ms, _ in hits),
                "later_reader_cached": sum(bool(e[0].get("cached")) for _, e in hits),
                "cpu_s_per_key": cpu_first / n,
            }
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=8, help="fresh requests per side")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(args.n, pristine=True), measure(args.n, pristine=False)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'':28} {'pristine on':>12} {'pristine off':>13}")
    for key, label in (
        ("edit_ms", "edit loop, median ms"),
        ("first_reader_ms", "first reader, median ms"),
        ("first_reader_cached", "  of which cached"),
        ("later_reader_ms", "later reader, median ms"),
        ("later_reader_cached", "  of which cached"),
        ("cpu_s_per_key", "CPU-s per key (1st reader)"),
    ):
        on, off = rows[0][key], rows[1][key]
        fmt = "{:>12.1f} {:>13.1f}" if isinstance(on, float) else "{:>12} {:>13}"
        print(f"{label:28} " + fmt.format(on, off))


if __name__ == "__main__":
    main()
