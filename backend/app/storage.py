"""Storage for snippets and cached results, behind a small interface.

Snippets are immutable and content-addressed (SPEC §3, DESIGN "Storage"): the id is
the shortest prefix (at least ``MIN_ID_LENGTH``) of the base32 SHA-256 of
``"jaxplay-snippet-v<FORMAT>\\n" + canonical JSON`` that no other snippet has; the
same content always gets the same id. SQLite (WAL) is the implementation here;
PostgreSQL (``pg_storage.PgStorage``, shared by server replicas) has the same schema
and behaviour behind the same ``Storage`` protocol; ``open_storage`` picks by URL.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sandbox.protocol import RunRequest

SNIPPET_FORMAT = 1
MIN_ID_LENGTH = 8

T = TypeVar("T")

#: An entry's states (backend/app/cache.py says what each means).
CANDIDATE, CONFIRMED, UNSTABLE = "candidate", "confirmed", "unstable"
#: Bytes an entry costs besides its body (key, digests, row overhead).
ROW_OVERHEAD = 256


@dataclass(frozen=True)
class CachedResult:
    state: str
    body: str
    created: float  # when the run that computed it ended (unix seconds)
    tenant: str = ""  # who computed it (a hash, as ResultRecord.tenant)


@dataclass(frozen=True)
class ResultRecord:
    """One run's evidence: the digest of what it showed, by whom (a hash), and the
    body to keep when it is the first (``state`` is ``unstable`` for output that can
    never be shared, e.g. output naming its own run)."""

    digest: str
    tenant: str
    body: str
    state: str = CANDIDATE

    @property
    def size(self) -> int:
        return len(self.body.encode("utf-8")) + ROW_OVERHEAD

    def upsert_params(self, key: str) -> tuple[Any, ...]:
        """RESULT_UPSERT's parameters, in its order, for this record under ``key``."""
        return (key, self.state, self.digest, self.tenant, self.body, self.size, time.time())


@dataclass(frozen=True)
class CacheLimits:
    max_entries: int
    max_bytes: int


#: One statement, atomic on its row, that is the cache's whole rule: the first run
#: of a key leaves a candidate; a run by another tenant that showed the same confirms
#: it; a run that showed anything else (or output that may never be shared) makes it
#: unstable for good, its body dropped. A confirmed entry is never replaced.
#: Parameters: key, state, digest, tenant, body, size, now (SQLite ``?``; PostgreSQL
#: takes the same text with ``%s``).
RESULT_UPSERT = f"""
INSERT INTO cache_results (key, state, digest, tenant, body, size, created)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
    state = CASE
        WHEN cache_results.state = 'unstable' OR excluded.state = 'unstable'
             OR cache_results.digest <> excluded.digest THEN 'unstable'
        WHEN cache_results.state = 'candidate' AND cache_results.tenant <> excluded.tenant
             THEN 'confirmed'
        ELSE cache_results.state END,
    body = CASE
        WHEN cache_results.state = 'unstable' OR excluded.state = 'unstable'
             OR cache_results.digest <> excluded.digest THEN ''
        ELSE cache_results.body END,
    size = CASE
        WHEN cache_results.state = 'unstable' OR excluded.state = 'unstable'
             OR cache_results.digest <> excluded.digest THEN {ROW_OVERHEAD}
        ELSE cache_results.size END
RETURNING state
"""

#: The cache's size now (a scan of the covering index ``cache_results_age``).
RESULT_TOTALS = "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM cache_results"
#: The oldest entries first (parameters: how many), for ``Trim.plan``.
RESULT_OLDEST = "SELECT key, size FROM cache_results ORDER BY created, key LIMIT ?"
#: How many of the oldest entries a trim reads at a time.
TRIM_BATCH = 256


@dataclass
class Trim:
    """Bringing the cache within its limits, oldest entries first, a batch at a time:
    ``over()`` says whether more must go, ``plan(oldest)`` picks the keys to delete from
    a batch of (key, size) and counts them as gone."""

    count: int
    total: int
    limits: CacheLimits

    def over(self) -> bool:
        return self.count > self.limits.max_entries or self.total > self.limits.max_bytes

    def plan(self, oldest: list[tuple[str, int]]) -> list[str]:
        victims: list[str] = []
        for key, size in oldest:
            if not self.over():
                break
            victims.append(key)
            self.count, self.total = self.count - 1, self.total - int(size)
        return victims


def canonical_json(request: RunRequest) -> str:
    """The request with every default filled in, keys sorted, no spaces; less
    ``jax_version`` when not set (the default), so that a snippet made before
    requests could name a version keeps its id."""
    data = request.model_dump(mode="json")
    if data.get("jax_version") is None:
        data.pop("jax_version", None)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def snippet_digest(canonical: str, fmt: int = SNIPPET_FORMAT) -> str:
    raw = hashlib.sha256(f"jaxplay-snippet-v{fmt}\n{canonical}".encode()).digest()
    return base64.b32encode(raw).decode().rstrip("=").lower()


class Storage(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def put_snippet(self, digest: str, body: str) -> str:
        """Store a snippet (if new); answer its id."""
        ...

    async def get_snippet(self, snippet_id: str) -> str | None: ...

    async def get_result(self, key: str) -> CachedResult | None: ...

    async def record_result(self, key: str, record: ResultRecord, limits: CacheLimits) -> str:
        """Add one run's evidence for ``key`` (see ``RESULT_UPSERT``); trim the cache
        to ``limits``; answer the entry's state afterwards."""
        ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS snippets (
    id      TEXT PRIMARY KEY,
    digest  TEXT NOT NULL UNIQUE,
    format  INTEGER NOT NULL,
    body    TEXT NOT NULL,
    created REAL NOT NULL
);
-- the result cache before it asked two runs to agree (format 1): dropped
DROP TABLE IF EXISTS results;
CREATE TABLE IF NOT EXISTS cache_results (
    key     TEXT PRIMARY KEY,
    state   TEXT NOT NULL,
    digest  TEXT NOT NULL,
    tenant  TEXT NOT NULL,
    body    TEXT NOT NULL,
    size    INTEGER NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS cache_results_age ON cache_results (created, size);
-- the cache's entries and bytes, kept by triggers in every writer's transaction, so
-- a write reads them in O(1) instead of scanning every entry (10,000 by default)
CREATE TABLE IF NOT EXISTS cache_totals (
    id      INTEGER PRIMARY KEY CHECK (id = 0),
    entries INTEGER NOT NULL,
    bytes   INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS cache_totals_insert AFTER INSERT ON cache_results BEGIN
    UPDATE cache_totals SET entries = entries + 1, bytes = bytes + NEW.size WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS cache_totals_delete AFTER DELETE ON cache_results BEGIN
    UPDATE cache_totals SET entries = entries - 1, bytes = bytes - OLD.size WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS cache_totals_resize AFTER UPDATE OF size ON cache_results BEGIN
    UPDATE cache_totals SET bytes = bytes - OLD.size + NEW.size WHERE id = 0;
END;
"""
#: The totals counted afresh (at open: whatever wrote the file before, they start exact).
_RECOUNT = """
INSERT OR REPLACE INTO cache_totals (id, entries, bytes)
SELECT 0, COUNT(*), COALESCE(SUM(size), 0) FROM cache_results
"""
#: The cache's size now, as the triggers keep it (SQLite; RESULT_TOTALS counts).
_SQLITE_TOTALS = "SELECT entries, bytes FROM cache_totals WHERE id = 0"


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
        db.executescript(_SCHEMA)
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
            db.execute("ROLLBACK")
            raise

    async def get_snippet(self, snippet_id: str) -> str | None:
        row = await self._call(self._get, "SELECT body FROM snippets WHERE id = ?", snippet_id)
        return None if row is None else str(row[0])

    def _get(self, sql: str, key: str) -> Any:
        return self._conn().execute(sql, (key,)).fetchone()

    async def get_result(self, key: str) -> CachedResult | None:
        row = await self._call(
            self._get, "SELECT state, body, created, tenant FROM cache_results WHERE key = ?", key
        )
        if row is None:
            return None
        return CachedResult(str(row[0]), str(row[1]), float(row[2]), str(row[3]))

    async def record_result(self, key: str, record: ResultRecord, limits: CacheLimits) -> str:
        state: str = await self._call(self._record_result, key, record, limits)
        return state

    def _record_result(self, key: str, record: ResultRecord, limits: CacheLimits) -> str:
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
                db.execute("ROLLBACK")
                raise
        finally:
            db.execute("PRAGMA synchronous=FULL")
        return str(row[0])


def open_storage(url: str) -> Storage:
    if url.startswith("sqlite:///"):
        return SqliteStorage.from_url(url)
    if url.startswith(("postgresql://", "postgres://")):
        from backend.app.pg_storage import PgStorage

        return PgStorage(url)
    raise ValueError(
        f"database_url: unsupported {url.split(':', 1)[0]!r}; use sqlite:///PATH or postgresql://..."
    )
