"""Fixtures for the server tests: settings on a temporary database, the app with
the fake pool (fast unit tests) or with the real subprocess pool (the real path)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.app import Settings, create_app
from backend.app.storage.sqlite import SqliteStorage
from backend.app.trust.cache import ResultCache

from .fakes import FakePool


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp_path / 'jaxplay.sqlite3'}",
        "probe_on_start": False,
        "rate_limit_per_minute": 0,
        "max_runs_per_tenant": 8,
        "max_runs_per_client": 8,  # the per-address cap has tests of its own
        "frontend_dist": tmp_path / "no-dist",
        "metrics_public": True,  # off by default; the tests read /metrics where they run
        # The server's own pristine runs would add to every fake pool's count; the
        # cache's tests (test_cache_and_storage.py, test_embed.py...) turn them on.
        "pristine_concurrency": 0,
        "allowed_hosts": ["localhost", "127.0.0.1", "[::1]", "testserver"],  # TestClient's
        "log_format": "text",
        "log_level": "warning",
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def settings_factory(tmp_path: Path) -> Callable[..., Settings]:
    return lambda **overrides: make_settings(tmp_path, **overrides)


@pytest.fixture
def small_cache(tmp_path: Path) -> ResultCache:
    """A result cache on its own SQLite file, for the tests of its keys."""
    sizes = make_settings(
        tmp_path,
        cache_enabled=True,
        cache_max_entries=10,
        cache_max_bytes=1 << 20,
        cache_max_entry_bytes=1 << 20,
    )
    return ResultCache(SqliteStorage(str(tmp_path / "c.sqlite3")), sizes, context={})


@pytest.fixture
def fake_pool() -> FakePool:
    return FakePool(max_concurrent=4)


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[Callable[..., tuple[TestClient, FakePool]]]:
    """``make_client(pool=..., **settings)`` -> a started TestClient and its pool."""
    clients: list[TestClient] = []

    def make(pool: Any = None, **overrides: Any) -> tuple[TestClient, Any]:
        pool = pool if pool is not None else FakePool(max_concurrent=4)
        app = create_app(make_settings(tmp_path, **overrides), pool=pool, pool_name="fake")
        client = TestClient(app)
        client.__enter__()
        clients.append(client)
        return client, pool

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., tuple[TestClient, FakePool]]) -> TestClient:
    return make_client()[0]
