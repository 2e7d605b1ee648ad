"""``/healthz`` while ``/api/v1/across`` diffs crafted pairs: the diffs stay off the loop.

Starts a real server (uvicorn, in a child process of this script, on a free loopback
port) whose pools are fakes (``sandbox.pool.fake``): the default version and a
stamped "0.4.38" each answer with a jaxpr of about 1 MiB, crafted for difflib (tens of
thousands of lines of under two hundred kinds, in a different order on each side:
its matcher's worst kind of input, minutes of CPU), so each across request carries a
~2 MiB pair. Then, per scenario, ``GET /healthz`` is timed every 10 ms:

- idle: nothing else running (the baseline);
- cut: two such across requests at once, under the default budget (the pair is over
  ``JAXPLAY_ACROSS_DIFF_CHARS``: not diffed, said in its ``diff``);
- diffed: the same with the size cap lifted, so the diff process really works on the
  pair, up to ``JAXPLAY_ACROSS_DIFF_S`` (10 s).

    .venv/bin/python benchmarks/server/across_healthz.py [--json]

One across request warms the server first (not timed). Prints /healthz's p50, p99
and max per scenario, and each across request's time and
what its diff said. Exit status 1 if a loaded scenario's p99 is over --max-p99-ms
(200). Timings depend on the machine's load: the lead measures on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = "0.99.0"
OLD = "0.4.38"


def crafted(seed: int, lines: int = 20_000, distinct: int = 190) -> str:
    """~1 MiB of lines of ``distinct`` kinds, the same kinds on both sides in another
    order (``seed``): each kind under difflib's autojunk threshold (1 % of the lines
    + 1), so its matcher compares every occurrence with every other (minutes)."""
    pad = "y" * 40
    return "".join(f"  x{(i * (7 + 2 * seed)) % distinct:03d} = {pad}\n" for i in range(lines))


def serve(port: int, versions_dir: Path, diff_chars: int) -> None:
    """The server: a versioned pool of fakes, each version with its crafted jaxpr."""
    import uvicorn

    from backend.app import Settings, create_app
    from sandbox.pool.fake import FakePool, default_script
    from sandbox.pool.versioned import VersionedPool

    texts = {DEFAULT: crafted(0), OLD: crafted(1)}

    def script_of(version: str) -> Any:
        def script(run: Any) -> list[dict[str, Any]]:
            return [
                dict(e, text=texts[version]) if e["type"] == "jaxpr" else e
                for e in default_script(run)
            ]

        return script

    def make(base: Any, env: Any) -> Any:
        pool = base.for_environment(env)
        pool.script = script_of(env.version)
        return pool

    default = FakePool(8, script_of(DEFAULT))
    default.worker = dict(default.worker, jax_version=DEFAULT)
    pool = VersionedPool(default, default_version=DEFAULT, versions_dir=versions_dir, make=make)
    settings = Settings(
        database_url=f"sqlite:///{versions_dir.parent / 'jaxplay.sqlite3'}",
        probe_on_start=False,
        rate_limit_per_minute=0,
        max_runs_per_tenant=8,
        max_runs_per_client=8,
        frontend_dist=versions_dir.parent / "no-dist",
        across_diff_chars=diff_chars,
        log_level="warning",
    )
    app = create_app(settings, pool=pool, pool_name="fake")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(versions_dir: Path, diff_chars: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [sys.executable, __file__, "--serve", str(port), str(versions_dir), str(diff_chars)]
    proc = subprocess.Popen(argv, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not start")


def sample(url: str, stop: threading.Event) -> list[float]:
    times: list[float] = []
    with httpx.Client(timeout=30) as client:
        while not stop.is_set():
            t0 = time.perf_counter()
            client.get(f"{url}/healthz").raise_for_status()
            times.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.01)
    return times


def across(url: str, out: list[dict[str, Any]]) -> None:
    body = {
        "request": {"code": "def f(x):\n    return x\n", "outputs": ["jaxpr"], "cache": False},
        "versions": [DEFAULT, OLD],
    }
    t0 = time.perf_counter()
    r = httpx.post(f"{url}/api/v1/across", json=body, timeout=120)
    r.raise_for_status()
    jaxpr = next(o for o in r.json()["outputs"] if o["output"] == "jaxpr")
    diff = jaxpr["changes"][0]["diff"] if jaxpr["changes"] else ""
    out.append({"s": time.perf_counter() - t0, "diff": diff[:90].replace("\n", " ")})


def scenario(url: str, requests: int, idle_s: float) -> dict[str, Any]:
    stop = threading.Event()
    times: list[float] = []
    sampler = threading.Thread(target=lambda: times.extend(sample(url, stop)))
    sampler.start()
    answers: list[dict[str, Any]] = []
    if requests:
        clients = [threading.Thread(target=across, args=(url, answers)) for _ in range(requests)]
        for c in clients:
            c.start()
        for c in clients:
            c.join()
    else:
        time.sleep(idle_s)
    stop.set()
    sampler.join()
    ordered = sorted(times)
    return {
        "samples": len(times),
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
        "max_ms": round(ordered[-1], 2),
        "across": answers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--max-p99-ms", type=float, default=200.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), Path(args.serve[1]), int(args.serve[2]))
        return
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="jaxplay-across-") as tmp:
        versions = Path(tmp, "versions")
        (versions / OLD).mkdir(parents=True)
        stamp = {"jax": OLD, "python": "3.11.7", "base_prefix": "/nonexistent"}
        (versions / OLD / ".jaxplay-version.json").write_text(json.dumps(stamp))
        for name, chars in (("cut", 512 * 1024), ("diffed", 16 * 2**20)):
            proc, url = start(versions, chars)
            try:
                if name == "cut":  # the server's first requests pay its imports: not timed
                    across(url, [])
                if name == "cut":
                    results["idle"] = scenario(url, 0, idle_s=3.0)
                results[name] = scenario(url, 2, idle_s=0)
            finally:
                proc.terminate()
                proc.wait(10)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for name, r in results.items():
            print(
                f"{name:>7}: /healthz p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, "
                f"max {r['max_ms']} ms ({r['samples']} samples)"
            )
            for a in r["across"]:
                print(f"         across {a['s']:.2f} s: {a['diff']}")
    worst = max(results[n]["p99_ms"] for n in ("cut", "diffed"))
    sys.exit(1 if worst > args.max_p99_ms else 0)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.support.reproduce import announce

    announce()
    os.environ.setdefault("JAXPLAY_LOG_FORMAT", "text")
    main()
