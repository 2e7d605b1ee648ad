"""What the result cache's rule costs: one run's evidence written, and the cache
trimmed to its budgets, on every write (backend/app/storage/sqlite.py, SQLite).

    python benchmarks/server/cache_writes.py [--entries 1000 10000] [--writes 200]

For each size, the cache is filled with that many entries of ~4 KiB (a full cache:
every write then trims one), then
``--writes`` more are recorded (each a new key: the insert, the trim to
``max_entries`` and ``max_bytes``, one transaction); prints the median and p90 of a
write, and the lookup of a confirmed entry, in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from backend.app.storage.base import CacheLimits, ResultRecord
from backend.app.storage.sqlite import SqliteStorage


async def measure(entries: int, writes: int, body: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.sqlite3"
        store = SqliteStorage(str(path))
        await store.open()
        await store.close()
        with sqlite3.connect(path) as db:  # filled in one transaction: the writes are measured
            size = ResultRecord("d", "a", body).size
            db.executemany(
                "INSERT INTO cache_results VALUES (?, 'candidate', ?, 'a', ?, ?, ?)",
                ((f"fill{i}", f"d{i}", body, size, time.time()) for i in range(entries)),
            )
        await store.open()
        limits = CacheLimits(max_entries=entries, max_bytes=entries * (len(body) + 512))
        await store.record_result("fill0", ResultRecord("d0", "b", body), limits)  # confirmed
        write_ms, read_ms = [], []
        for i in range(writes):
            t0 = time.perf_counter()
            await store.record_result(f"new{i}", ResultRecord(f"n{i}", "a", body), limits)
            write_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            await store.get_result(f"fill{entries - 1}")
            read_ms.append((time.perf_counter() - t0) * 1000)
        await store.close()
    write_ms.sort()
    return {
        "write_median": statistics.median(write_ms),
        "write_p90": write_ms[int(0.9 * (len(write_ms) - 1))],
        "read_median": statistics.median(read_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--writes", type=int, default=200)
    args = parser.parse_args()
    body = "x" * 4096
    print("entries   write median   write p90   lookup median   (ms, SQLite, one transaction each)")
    for n in args.entries:
        r = asyncio.run(measure(n, args.writes, body))
        print(
            f"{n:7d}   {r['write_median']:12.2f}   {r['write_p90']:9.2f}   {r['read_median']:13.3f}"
        )


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
