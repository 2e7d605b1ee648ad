"""SQLite storage (WAL mode): base.py's ``Storage`` in one file, every call on one thread
of its own, in order. The schema comes from backend/app/storage/migrations/.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from backend.app.storage.base import (
    MIN_ID_LENGTH,
    RESULT_GET,
    RESULT_OLDEST,
    RESULT_OVER_QUOTA,
    RESULT_SERVED,
    RESULT_UNSTABLE_OVER,
    RESULT_UPSERT,
    SERVED_RESOLUTION_S,
    SNIPPET_FORMAT,
    TRIM_BATCH,
    CachedResult,
    CacheLimits,
    ResultRecord,
    RunRow,
    Trim,
)
from backend.app.storage.migrations import migrate_sqlite

#: The totals counted afresh (at open: whatever wrote the file before, they start exact).
_RECOUNT = """
INSERT OR REPLACE INTO cache_totals (id, entries, bytes)
SELECT 0, COUNT(*), COALESCE(SUM(size), 0) FROM cache_results WHERE state <> 'unstable'
"""
#: The cache's size now, as the triggers keep it (SQLite; RESULT_TOTALS counts).
_SQLITE_TOTALS = "SELECT entries, bytes FROM cache_totals WHERE id = 0"


def _rollback(db: sqlite3.Connection) -> None:
    """Undo the open transaction, if SQLite has not already: a COMMIT that failed for
    a full disk (SQLITE_FULL) rolled it back itself, and a second ROLLBACK's own
    error ("no transaction is active") hid the full disk from the caller."""
    if db.in_transaction:
        db.execute("ROLLBACK")


class SqliteStorage:
    """SQLite in WAL mode; every call runs on one thread of its own, in order."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._db: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None

    @classmethod
    def from_url(cls, url: str) -> SqliteStorage:
        return cls(url.removeprefix("sqlite:///"))

    async def _call(self, fn: Any, *args: Any) -> Any:
        assert self._executor is not None, "storage is not open"
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def open(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jaxplay-db")
        await self._call(self._open)

    def _open(self) -> None:
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False, timeout=10)
        # Deleted rows (trimmed cache entries) give their pages back to the file system.
        # The mode only takes effect on an empty database or after a VACUUM: a file
        # made without it is vacuumed once, now.
        if db.execute("PRAGMA auto_vacuum").fetchone()[0] != 1:
            db.execute("PRAGMA auto_vacuum=FULL")
            db.execute("VACUUM")
        db.execute("PRAGMA journal_mode=WAL")
        # FULL: a snippet that was answered 201 survives a crash of the machine too.
        db.execute("PRAGMA synchronous=FULL")
        migrate_sqlite(db)
        db.execute(_RECOUNT)
        self._db = db

    async def close(self) -> None:
        if self._executor is None:
            return
        await self._call(self._close)
        self._executor.shutdown(wait=True)
        self._executor = None

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _conn(self) -> sqlite3.Connection:
        assert self._db is not None, "storage is not open"
        return self._db

    async def put_snippet(self, digest: str, body: str) -> str:
        result: str = await self._call(self._put_snippet, digest, body)
        return result

    def _put_snippet(self, digest: str, body: str) -> str:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT id FROM snippets WHERE digest = ?", (digest,)).fetchone()
            if row is not None:
                db.execute("COMMIT")
                return str(row[0])
            for n in range(MIN_ID_LENGTH, len(digest) + 1):
                prefix = digest[:n]
                if db.execute("SELECT 1 FROM snippets WHERE id = ?", (prefix,)).fetchone() is None:
                    db.execute(
                        "INSERT INTO snippets (id, digest, format, body, created) VALUES (?, ?, ?, ?, ?)",
                        (prefix, digest, SNIPPET_FORMAT, body, time.time()),
                    )
                    db.execute("COMMIT")
                    return prefix
            raise RuntimeError("no free id for a snippet")  # only if a full digest collided
        except BaseException:
            _rollback(db)
            raise

    async def get_snippet(self, snippet_id: str) -> str | None:
        row = await self._call(self._get, "SELECT body FROM snippets WHERE id = ?", snippet_id)
        return None if row is None else str(row[0])

    def _get(self, sql: str, key: str) -> Any:
        return self._conn().execute(sql, (key,)).fetchone()

    async def get_result(self, key: str) -> CachedResult | None:
        row = await self._call(self._get, RESULT_GET, key)
        if row is None:
            return None
        return CachedResult(str(row[0]), str(row[1]), float(row[2]), str(row[3]), str(row[4]))

    async def record_result(
        self, key: str, record: ResultRecord, limits: CacheLimits
    ) -> tuple[str, str]:
        answer: tuple[str, str] = await self._call(self._record_result, key, record, limits)
        return answer

    async def record_runs(self, rows: list[RunRow], keep_since: float) -> None:
        await self._call(self._record_runs, rows, keep_since)

    def _record_runs(self, rows: list[RunRow], keep_since: float) -> None:
        db = self._conn()
        # Figures, not promises: a crash of the machine may lose the last few (no fsync).
        db.execute("PRAGMA synchronous=NORMAL")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT INTO run_stats (at, jax_version, cached, status, first_ir_ms)"
                    " VALUES (?, ?, ?, ?, ?)",
                    [(r.at, r.jax_version, int(r.cached), r.status, r.first_ir_ms) for r in rows],
                )
                db.execute("DELETE FROM run_stats WHERE at < ?", (keep_since,))
                db.execute("COMMIT")
            except BaseException:
                _rollback(db)
                raise
        finally:
            db.execute("PRAGMA synchronous=FULL")

    async def run_rows(self, since: float) -> list[RunRow]:
        rows: list[RunRow] = await self._call(self._run_rows, since)
        return rows

    def _run_rows(self, since: float) -> list[RunRow]:
        cur = self._conn().execute(
            "SELECT at, jax_version, cached, status, first_ir_ms FROM run_stats"
            " WHERE at >= ? ORDER BY at",
            (since,),
        )
        return [RunRow(a, v, bool(c), st, ms) for a, v, c, st, ms in cur.fetchall()]

    async def mark_served(self, key: str) -> None:
        now = time.time()
        await self._call(self._mark_served, key, now)

    def _mark_served(self, key: str, now: float) -> None:
        self._conn().execute(RESULT_SERVED, (now, key, now - SERVED_RESOLUTION_S))

    def _record_result(
        self, key: str, record: ResultRecord, limits: CacheLimits
    ) -> tuple[str, str]:
        db = self._conn()
        # A cache row is evidence, not a promise made to a client (a snippet is): its
        # commit is not flushed to the disk on its own (WAL, synchronous=NORMAL: it
        # survives the server's crash, a crash of the machine may lose the last few,
        # which only means those runs count again). Saves an fsync on every run.
        db.execute("PRAGMA synchronous=NORMAL")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(RESULT_UPSERT, record.upsert_params(key)).fetchone()
                for sql, param in (
                    (RESULT_OVER_QUOTA, (record.group, limits.candidates_per_group)),
                    (RESULT_UNSTABLE_OVER, (limits.max_unstable,)),
                ):
                    gone = db.execute(sql, param).fetchall()
                    db.executemany("DELETE FROM cache_results WHERE key = ?", gone)
                count, total = db.execute(_SQLITE_TOTALS).fetchone()
                trim = Trim(count, total, limits)
                while trim.over():
                    victims = trim.plan(db.execute(RESULT_OLDEST, (TRIM_BATCH,)).fetchall())
                    if not victims:
                        break
                    db.executemany(
                        "DELETE FROM cache_results WHERE key = ?", [(k,) for k in victims]
                    )
                db.execute("COMMIT")
            except BaseException:
                _rollback(db)
                raise
        finally:
            db.execute("PRAGMA synchronous=FULL")
        return str(row[0]), str(row[1])
