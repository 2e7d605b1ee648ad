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
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sandbox.protocol import RunRequest

SNIPPET_FORMAT = 1
MIN_ID_LENGTH = 8

T = TypeVar("T")


def canonical_json(request: RunRequest) -> str:
    """The request with every default filled in, keys sorted, no spaces."""
    return json.dumps(
        request.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


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

    async def get_result(self, key: str) -> str | None: ...

    async def put_result(self, key: str, body: str, max_entries: int) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS snippets (
    id      TEXT PRIMARY KEY,
    digest  TEXT NOT NULL UNIQUE,
    format  INTEGER NOT NULL,
    body    TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    key     TEXT PRIMARY KEY,
    body    TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS results_created ON results (created);
"""


class SqliteStorage:
    """SQLite in WAL mode; every call runs on one thread of its own, in order."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._db: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._puts = 0

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
        db.execute("PRAGMA journal_mode=WAL")
        # FULL: a snippet that was answered 201 survives a crash of the machine too.
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(_SCHEMA)
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

    async def get_result(self, key: str) -> str | None:
        row = await self._call(self._get, "SELECT body FROM results WHERE key = ?", key)
        return None if row is None else str(row[0])

    async def put_result(self, key: str, body: str, max_entries: int) -> None:
        await self._call(self._put_result, key, body, max_entries)

    def _put_result(self, key: str, body: str, max_entries: int) -> None:
        db = self._conn()
        db.execute(
            "INSERT OR REPLACE INTO results (key, body, created) VALUES (?, ?, ?)",
            (key, body, time.time()),
        )
        self._puts += 1
        if self._puts % 64 == 1:
            db.execute(
                "DELETE FROM results WHERE key IN "
                "(SELECT key FROM results ORDER BY created DESC LIMIT -1 OFFSET ?)",
                (max_entries,),
            )


def open_storage(url: str) -> Storage:
    if url.startswith("sqlite:///"):
        return SqliteStorage.from_url(url)
    if url.startswith(("postgresql://", "postgres://")):
        from backend.app.pg_storage import PgStorage

        return PgStorage(url)
    raise ValueError(
        f"database_url: unsupported {url.split(':', 1)[0]!r}; use sqlite:///PATH or postgresql://..."
    )
