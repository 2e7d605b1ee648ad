"""What issue 37's routes cost, against one live ``jaxplay serve`` on the real (unjailed
subprocess) pool, and the public figures at scale:

- ``POST /api/v1/snippets/import`` of a quickstart-shaped notebook (median of --rounds);
- ``GET /api/v1/snippets/{id}/report.md``: the first (its run, and the worker's
  ``print_environment_info()`` run), then again (the environment kept; the snippet's run
  a fresh one, as the caller's own runs are: docs/api.md "The result cache");
- ``GET /api/v1/stats`` on the live server, and ``RunStats.figures`` over a day of
  --rows rows in SQLite (a busy day), measured in this process.

    .venv/bin/python benchmarks/server/reports_and_figures.py [--rounds 10] [--rows 100000]

Prints medians in ms. Depends on the machine's load: say so when quoting it.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import nbformat
from nbformat.v4 import new_code_cell, new_notebook

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from backend.app.relay.figures import RunStats
from backend.app.storage.base import RunRow
from backend.app.storage.sqlite import SqliteStorage
from tests.support.live_server import LiveServer

NOTEBOOK = nbformat.writes(
    new_notebook(
        cells=[
            new_code_cell("!pip install -U jax\n%matplotlib inline\nimport jax.numpy as jnp"),
            new_code_cell("def f(x):\n    return jnp.sum(jnp.tanh(x) ** 2)"),
            new_code_cell("%%time\nprint(f(jnp.ones(3)))"),
        ]
    )
)


def timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - t) * 1000


def live(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"JAXPLAY_PROBE_ON_START": "false", "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
               "JAXPLAY_SNIPPET_RATE_PER_MINUTE": "0"}  # fmt: skip
        server = LiveServer(
            Path(tmp) / "b.sqlite3", "--pool", "subprocess", "--unsafe-no-jail", env=env
        ).start()
        try:
            url = server.url
            headers = {"content-type": "application/x-ipynb+json"}
            imports = [
                timed(
                    lambda: httpx.post(
                        url + "/api/v1/snippets/import", content=NOTEBOOK, headers=headers
                    ).raise_for_status()
                )
                for _ in range(rounds)
            ]
            sid = httpx.post(url + "/api/v1/snippets/import", content=NOTEBOOK,
                             headers=headers).json()["id"]  # fmt: skip
            body = {"code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(x)\n",
                    "args": "(jnp.ones(3),)"}  # fmt: skip
            sid = httpx.post(url + "/api/v1/snippets", json=body).json()["id"]
            report = f"{url}/api/v1/snippets/{sid}/report.md"
            first = timed(lambda: httpx.get(report, timeout=300).raise_for_status())
            again = [timed(lambda: httpx.get(report, timeout=300).raise_for_status())
                     for _ in range(3)]  # fmt: skip
            stats = [timed(lambda: httpx.get(url + "/api/v1/stats").raise_for_status())
                     for _ in range(rounds)]  # fmt: skip
        finally:
            server.stop()
    print(f"notebook import           median {statistics.median(imports):8.1f} ms")
    print(f"report.md, first          {first:15.1f} ms (its run + the environment run)")
    print(f"report.md, again          median {statistics.median(again):8.1f} ms")
    print(f"GET /api/v1/stats (few)   median {statistics.median(stats):8.1f} ms")


async def at_scale(rows: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStorage(str(Path(tmp) / "s.sqlite3"))
        await store.open()
        now = time.time()
        rng = random.Random(0)
        made = [
            RunRow(
                now - rng.random() * 86_400,
                rng.choice(["0.4.38", "0.10.2", "0.12.0.1"]),
                rng.random() < 0.4,
                "ok",
                rng.lognormvariate(6, 1),
            )
            for _ in range(rows)
        ]
        t = time.perf_counter()
        await store.record_runs(made, now - 2 * 86_400)
        write_ms = (time.perf_counter() - t) * 1000
        stats = RunStats(store, cache_s=0)  # each made afresh: the cost of one making
        times = []
        for _ in range(3):
            t = time.perf_counter()
            await stats.figures()
            times.append((time.perf_counter() - t) * 1000)
        await store.close()
    print(f"{rows} rows written once    {write_ms:15.1f} ms")
    print(f"figures over {rows} rows   median {statistics.median(times):8.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    live(args.rounds)
    asyncio.run(at_scale(args.rows))
    return 0


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    raise SystemExit(main())
