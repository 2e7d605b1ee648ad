"""The schema, for PostgreSQL and SQLite alike: numbered modules ``vNNNN_<name>.py``,
each with ``SQL`` and, where SQLite needs other text, ``SQLITE`` (the one place either
database's tables are written).

``migrate(conn)`` (PostgreSQL) and ``migrate_sqlite(db)`` apply, in order and each in
its own transaction, those that the database has not recorded in
``jaxplay_migrations``; PostgreSQL holds an advisory lock so that replicas starting
together migrate once, SQLite its write lock. A database migrated by a newer jaxplay
(a version this build does not know) is refused rather than used.
Add a migration as a new module; never edit one that has shipped.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

#: the advisory lock's key (any constant shared by every jaxplay)
LOCK_KEY = 7_204_117_001


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str
    #: SQLite's text of the same step (the same as ``sql`` unless the module says)
    sqlite: str


class MigrationError(RuntimeError):
    pass


def migrations() -> list[Migration]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        match = re.fullmatch(r"v(\d{4})_(\w+)", info.name)
        if match:
            module = importlib.import_module(f"{__name__}.{info.name}")
            sqlite = getattr(module, "SQLITE", module.SQL)
            found.append(Migration(int(match.group(1)), match.group(2), module.SQL, sqlite))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise MigrationError(f"migrations must be numbered 1, 2, ... without gaps: {versions}")
    return found


_CREATE_RECORD = (
    "CREATE TABLE IF NOT EXISTS jaxplay_migrations ("
    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied DOUBLE PRECISION NOT NULL)"
)


def _refuse_newer(done: set[int], known: list[Migration]) -> None:
    newest = max((m.version for m in known), default=0)
    if done and max(done) > newest:
        raise MigrationError(
            f"the database's schema is version {max(done)}, newer than this jaxplay "
            f"knows ({newest}): upgrade jaxplay"
        )


async def migrate(conn: Any) -> list[int]:
    """Bring the database to the newest schema; answer the versions applied now.
    ``conn``: a psycopg AsyncConnection in autocommit mode."""
    known = migrations()
    await conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
    try:
        await conn.execute(_CREATE_RECORD)
        cur = await conn.execute("SELECT version FROM jaxplay_migrations")
        done = {int(row[0]) for row in await cur.fetchall()}
        _refuse_newer(done, known)
        applied = []
        for m in known:
            if m.version in done:
                continue
            async with conn.transaction():
                await conn.execute(m.sql)
                await conn.execute(
                    "INSERT INTO jaxplay_migrations (version, name, applied) VALUES (%s, %s, %s)",
                    (m.version, m.name, time.time()),
                )
            applied.append(m.version)
        return applied
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))


def migrate_sqlite(db: sqlite3.Connection) -> list[int]:
    """``migrate`` for SQLite (``db`` in autocommit mode, ``isolation_level=None``).
    Each step records its version first, under the write lock, so a second process
    opening the file at the same moment skips what the first applied."""
    known = migrations()
    _adopt_unrecorded(db)
    done = {int(row[0]) for row in db.execute("SELECT version FROM jaxplay_migrations")}
    _refuse_newer(done, known)
    applied = []
    for m in known:
        if m.version in done:
            continue
        try:
            db.executescript(
                "BEGIN IMMEDIATE;"
                f"INSERT INTO jaxplay_migrations VALUES ({m.version}, '{m.name}', {time.time()});"
                f"{m.sqlite};COMMIT;"
            )
        except sqlite3.IntegrityError:  # another process recorded it first
            db.execute("ROLLBACK")
            continue
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        applied.append(m.version)
    return applied


def _adopt_unrecorded(db: sqlite3.Connection) -> None:
    """A file written before SQLite's schema came from these migrations holds the
    tables with no record of versions; it was brought to the newest schema of its day
    at every open, so its version is the newest step whose tables it holds."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "jaxplay_migrations" in tables:
        return
    db.execute(_CREATE_RECORD)
    if "snippets" not in tables:
        return  # a new file: every step applies
    columns = {row[1] for row in db.execute("PRAGMA table_info(cache_results)")}
    version = 1
    if "cache_totals" in tables:
        version = 2
    if "grp" in columns:
        version = 3
    if version == 3 and "run_stats" in tables:
        version = 4
    db.executemany(
        "INSERT INTO jaxplay_migrations VALUES (?, ?, ?)",
        [(m.version, m.name, time.time()) for m in migrations() if m.version <= version],
    )
