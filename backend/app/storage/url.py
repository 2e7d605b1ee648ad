"""The storage a ``database_url`` names: SQLite (``sqlite:///PATH``, sqlite.py) or
PostgreSQL (``postgresql://...``, postgres.py, imported only then: it needs psycopg).
Both implement base.py's ``Storage``; this is the one module that knows both."""

from __future__ import annotations

from backend.app.storage.base import Storage
from backend.app.storage.sqlite import SqliteStorage


def open_storage(url: str) -> Storage:
    if url.startswith("sqlite:///"):
        return SqliteStorage.from_url(url)
    if url.startswith(("postgresql://", "postgres://")):
        from backend.app.storage.postgres import PgStorage

        return PgStorage(url)
    raise ValueError(
        f"database_url: unsupported {url.split(':', 1)[0]!r}; use sqlite:///PATH or postgresql://..."
    )
