"""SQLite's schema comes from the migrations (backend/app/storage/migrations/), as
PostgreSQL's does: a new file gets every step, recorded; a file written before the
steps were recorded is adopted at the version its tables show, its snippets kept; a
file migrated by a newer jaxplay is refused."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from backend.app.storage.migrations import MigrationError, migrate_sqlite, migrations
from backend.app.storage.sqlite import SqliteStorage


def _versions(path: Path) -> list[int]:
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute("SELECT version FROM jaxplay_migrations ORDER BY 1")]


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_a_new_file_gets_every_step_once(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite3"
    storage = SqliteStorage(str(path))
    asyncio.run(storage.open())
    asyncio.run(storage.close())
    every = [m.version for m in migrations()]
    assert every and _versions(path) == every
    assert {"snippets", "cache_results", "cache_totals", "run_stats"} <= _tables(path)
    assert "results" not in _tables(path)  # made by step 1, dropped by step 2
    db = sqlite3.connect(path, isolation_level=None)
    assert migrate_sqlite(db) == []  # opened again: nothing to apply
    db.close()


def test_a_file_from_before_the_records_is_adopted_and_keeps_its_snippets(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    # what the storage made before run_stats (step 4) existed
    db.executescript(
        "CREATE TABLE snippets (id TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE,"
        " format INTEGER NOT NULL, body TEXT NOT NULL, created REAL NOT NULL);"
        "CREATE TABLE cache_results (key TEXT PRIMARY KEY, state TEXT NOT NULL,"
        " digest TEXT NOT NULL, tenant TEXT NOT NULL, body TEXT NOT NULL,"
        " size INTEGER NOT NULL, created REAL NOT NULL, grp TEXT NOT NULL DEFAULT '',"
        " served REAL NOT NULL DEFAULT 0);"
        "CREATE TABLE cache_totals (id INTEGER PRIMARY KEY CHECK (id = 0),"
        " entries INTEGER NOT NULL, bytes INTEGER NOT NULL);"
        "INSERT INTO snippets VALUES ('abcdefgh', 'abcdefghij', 1, '{}', 0);"
        "INSERT INTO cache_results VALUES ('k', 'confirmed', 'd', 't', 'b', 1, 0, 'g', 0);"
    )
    assert migrate_sqlite(db) == [4]
    assert db.execute("SELECT body FROM snippets").fetchall() == [("{}",)]
    assert db.execute("SELECT key FROM cache_results").fetchall() == [("k",)]
    db.close()
    assert _versions(path) == [1, 2, 3, 4]
    assert "run_stats" in _tables(path)


def test_a_file_a_newer_jaxplay_migrated_is_refused(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "newer.sqlite3", isolation_level=None)
    migrate_sqlite(db)
    db.execute("INSERT INTO jaxplay_migrations VALUES (999, 'future', 0)")
    with pytest.raises(MigrationError, match="newer"):
        migrate_sqlite(db)
    db.close()
