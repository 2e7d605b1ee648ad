"""PostgreSQL storage: the same schema and behaviour as SQLite, shared by replicas.

Opened with ``postgresql://USER:PASSWORD@HOST:5432/DB`` (``database_url``). At open
the schema is migrated (``backend/app/storage/migrations``, under an advisory lock, so
replicas that start together migrate once). Snippet ids are taken as in SQLite — the
shortest free prefix of the digest — but safely across replicas: each prefix is
claimed with one ``INSERT ... ON CONFLICT DO NOTHING``, and a conflict that was the
same content (another replica, same moment) answers that row's id.

A few connections are kept (``connections``); one that breaks (PostgreSQL
restarted) is dropped and the call is tried once more on a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import psycopg

from backend.app.storage.base import (
    MIN_ID_LENGTH,
    RESULT_GET,
    RESULT_OLDEST,
    RESULT_OVER_QUOTA,
    RESULT_SERVED,
    RESULT_TOTALS,
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
from backend.app.storage.migrations import migrate

T = TypeVar("T")

#: The cache's rule and trim, as SQLite runs them (one text, two placeholder styles).
_UPSERT = RESULT_UPSERT.replace("?", "%s")
_OLDEST = RESULT_OLDEST.replace("?", "%s")
_GET = RESULT_GET.replace("?", "%s")
_SERVED = RESULT_SERVED.replace("?", "%s")
_OVER_QUOTA = RESULT_OVER_QUOTA.replace("?", "%s").replace("LIMIT -1", "LIMIT ALL")
_UNSTABLE_OVER = RESULT_UNSTABLE_OVER.replace("?", "%s").replace("LIMIT -1", "LIMIT ALL")


class PgStorage:
    def __init__(self, url: str, *, connections: int = 4, connect_timeout_s: float = 10.0) -> None:
        self._url = url.replace("postgres://", "postgresql://", 1)
        self._max = max(1, connections)
        self._connect_timeout_s = connect_timeout_s
        self._idle: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()
        self._open_count = 0
        self._all: set[psycopg.AsyncConnection[Any]] = set()
        self._opened = False

    # --- connections --------------------------------------------------------------

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(
            self._url, autocommit=True, connect_timeout=int(self._connect_timeout_s)
        )
        self._all.add(conn)
        return conn

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        assert self._opened, "storage is not open"
        if self._idle.empty() and self._open_count < self._max:
            self._open_count += 1
            try:
                conn = await self._connect()
            except BaseException:
                self._open_count -= 1
                raise
        else:
            conn = await self._idle.get()
        try:
            yield conn
        finally:
            if conn.closed or conn.broken:
                self._all.discard(conn)
                self._open_count -= 1
                with contextlib.suppress(Exception):
                    await conn.close()
            else:
                self._idle.put_nowait(conn)

    async def _call(self, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run ``fn`` on a connection; once more on a fresh one if the first broke."""
        for attempt in (1, 2):
            try:
                async with self._conn() as conn:
                    return await fn(conn)
            except psycopg.OperationalError as exc:
                if attempt == 2 or not _connection_lost(exc):
                    raise
                # What broke one idle connection (PostgreSQL restarted, or killed)
                # broke them all, though none says so until used: without this the
                # retry took the next broken one, and the first calls after a
                # restart failed (tests/storage/test_postgres_faults.py).
                await self._drop_idle()
        raise AssertionError("unreachable")

    async def _drop_idle(self) -> None:
        while not self._idle.empty():
            conn = self._idle.get_nowait()
            self._all.discard(conn)
            self._open_count -= 1
            with contextlib.suppress(Exception):
                await conn.close()

    # --- lifecycle ----------------------------------------------------------------

    async def open(self) -> None:
        conn = await self._connect()
        try:
            await migrate(conn)
        except BaseException:
            self._all.discard(conn)
            await conn.close()
            raise
        self._open_count = 1
        self._idle.put_nowait(conn)
        self._opened = True

    async def close(self) -> None:
        self._opened = False
        for conn in list(self._all):
            with contextlib.suppress(Exception):
                await conn.close()
        self._all.clear()
        self._open_count = 0
        self._idle = asyncio.Queue()

    # --- snippets -----------------------------------------------------------------

    async def put_snippet(self, digest: str, body: str) -> str:
        async def put(conn: psycopg.AsyncConnection[Any]) -> str:
            found = await _one(conn, "SELECT id FROM snippets WHERE digest = %s", (digest,))
            if found is not None:
                return str(found)
            for n in range(MIN_ID_LENGTH, len(digest) + 1):
                prefix = digest[:n]
                inserted = await _one(
                    conn,
                    "INSERT INTO snippets (id, digest, format, body, created) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
                    (prefix, digest, SNIPPET_FORMAT, body, time.time()),
                )
                if inserted is not None:
                    return prefix
                # The prefix is taken: by this very content (another replica just
                # stored it), or by another snippet (then try a longer prefix).
                found = await _one(conn, "SELECT id FROM snippets WHERE digest = %s", (digest,))
                if found is not None:
                    return str(found)
            raise RuntimeError("no free id for a snippet")  # only if a full digest collided

        return await self._call(put)

    async def get_snippet(self, snippet_id: str) -> str | None:
        async def get(conn: psycopg.AsyncConnection[Any]) -> str | None:
            body = await _one(conn, "SELECT body FROM snippets WHERE id = %s", (snippet_id,))
            return None if body is None else str(body)

        return await self._call(get)

    # --- results ------------------------------------------------------------------

    async def get_result(self, key: str) -> CachedResult | None:
        async def get(conn: psycopg.AsyncConnection[Any]) -> CachedResult | None:
            cur = await conn.execute(_GET, (key,))
            row = await cur.fetchone()
            if row is None:
                return None
            return CachedResult(str(row[0]), str(row[1]), float(row[2]), str(row[3]), str(row[4]))

        return await self._call(get)

    async def mark_served(self, key: str) -> None:
        now = time.time()

        async def mark(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute(_SERVED, (now, key, now - SERVED_RESOLUTION_S))

        await self._call(mark)

    async def record_result(
        self, key: str, record: ResultRecord, limits: CacheLimits
    ) -> tuple[str, str]:
        async def put(conn: psycopg.AsyncConnection[Any]) -> tuple[str, str]:
            async with conn.transaction():
                cur = await conn.execute(_UPSERT, record.upsert_params(key))
                state, digest = await cur.fetchone() or ("", "")
                for sql, param in (
                    (_OVER_QUOTA, (record.group, limits.candidates_per_group)),
                    (_UNSTABLE_OVER, (limits.max_unstable,)),
                ):
                    cur = await conn.execute(sql, param)
                    gone = [str(k) for (k,) in await cur.fetchall()]
                    if gone:
                        await conn.execute("DELETE FROM cache_results WHERE key = ANY(%s)", (gone,))
                cur = await conn.execute(RESULT_TOTALS)
                count, total = await cur.fetchone() or (0, 0)
                trim = Trim(count, total, limits)
                while trim.over():
                    cur = await conn.execute(_OLDEST, (TRIM_BATCH,))
                    victims = trim.plan([(str(k), int(n)) for k, n in await cur.fetchall()])
                    if not victims:
                        break
                    await conn.execute("DELETE FROM cache_results WHERE key = ANY(%s)", (victims,))
            return str(state), str(digest)

        return await self._call(put)

    # --- public figures (backend/app/relay/figures.py) ------------------------------------

    async def record_runs(self, rows: list[RunRow], keep_since: float) -> None:
        async def put(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.transaction():
                async with conn.cursor() as cur:
                    await cur.executemany(
                        "INSERT INTO run_stats (at, jax_version, cached, status, first_ir_ms)"
                        " VALUES (%s, %s, %s, %s, %s)",
                        [(r.at, r.jax_version, r.cached, r.status, r.first_ir_ms) for r in rows],
                    )
                await conn.execute("DELETE FROM run_stats WHERE at < %s", (keep_since,))

        await self._call(put)

    async def run_rows(self, since: float) -> list[RunRow]:
        async def get(conn: psycopg.AsyncConnection[Any]) -> list[RunRow]:
            cur = await conn.execute(
                "SELECT at, jax_version, cached, status, first_ir_ms FROM run_stats"
                " WHERE at >= %s ORDER BY at",
                (since,),
            )
            return [RunRow(a, v, bool(c), st, ms) for a, v, c, st, ms in await cur.fetchall()]

        return await self._call(get)


def _connection_lost(exc: psycopg.OperationalError) -> bool:
    """Whether the connection is what failed (worth a fresh one): no SQLSTATE (the
    socket broke), class 08 (connection exception) or 57 (PostgreSQL shut down or
    restarting). A full disk (53100) and the like fail the same on any connection."""
    state = exc.sqlstate
    return state is None or state.startswith(("08", "57"))


async def _one(conn: psycopg.AsyncConnection[Any], sql: str, params: tuple[Any, ...]) -> Any:
    """The first column of the first row, or None."""
    cur = await conn.execute(sql, params)
    row = await cur.fetchone()
    return None if row is None else row[0]
