"""Schema migrations for PostgreSQL: numbered modules ``vNNNN_<name>.py``, each with ``SQL``.

``migrate(conn)`` applies, in order and each in its own transaction, those that the
database has not recorded in ``jaxplay_migrations``, holding an advisory lock so that
replicas starting together migrate once. A database migrated by a newer jaxplay
(a version this build does not know) is refused rather than used.
Add a migration as a new module; never edit one that has shipped.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
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


class MigrationError(RuntimeError):
    pass


def migrations() -> list[Migration]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        match = re.fullmatch(r"v(\d{4})_(\w+)", info.name)
        if match:
            module = importlib.import_module(f"{__name__}.{info.name}")
            found.append(Migration(int(match.group(1)), match.group(2), module.SQL))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise MigrationError(f"migrations must be numbered 1, 2, ... without gaps: {versions}")
    return found


async def migrate(conn: Any) -> list[int]:
    """Bring the database to the newest schema; answer the versions applied now.
    ``conn``: a psycopg AsyncConnection in autocommit mode."""
    known = migrations()
    await conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS jaxplay_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied DOUBLE PRECISION NOT NULL)"
        )
        cur = await conn.execute("SELECT version FROM jaxplay_migrations")
        done = {int(row[0]) for row in await cur.fetchall()}
        newest = max((m.version for m in known), default=0)
        if done and max(done) > newest:
            raise MigrationError(
                f"the database's schema is version {max(done)}, newer than this jaxplay "
                f"knows ({newest}): upgrade jaxplay"
            )
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
