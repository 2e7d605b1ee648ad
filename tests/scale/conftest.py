"""The scale tests' services: a private redis-server and PostgreSQL for the session.

Without the binaries these tests skip, saying what to install; with
``JAXPLAY_SCALE_TESTS=require`` (CI) they fail instead. Each test gets its own Redis
key prefix and its own database, so tests share the servers but nothing else.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .services import Postgres, RedisServer

REQUIRE = os.environ.get("JAXPLAY_SCALE_TESTS", "") == "require"


def unavailable(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"JAXPLAY_SCALE_TESTS=require, but {reason}", pytrace=False)
    pytest.skip(reason)


def _missing_python() -> str | None:
    for module, package in (("redis", "redis"), ("psycopg", "psycopg[binary]")):
        try:
            __import__(module)
        except ImportError:
            return f"the Python package {package} is not installed (make setup)"
    return None


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    reason = _missing_python() or RedisServer.missing()
    if reason:
        unavailable(reason)
    directory = Path(tempfile.mkdtemp(prefix="jaxplay-redis-"))
    server = RedisServer(directory).start()
    yield server
    server.stop()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    reason = _missing_python() or Postgres.missing()
    if reason:
        unavailable(reason)
    server = Postgres()
    try:
        server.start()
    except Exception:
        server.stop()
        raise
    yield server
    server.stop()


@pytest.fixture
def prefix() -> str:
    """A Redis key prefix of this test's own."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def pg_url(postgres: Postgres) -> str:
    """A fresh, empty database of this test's own."""
    return postgres.create_database(f"t{uuid.uuid4().hex[:12]}")
