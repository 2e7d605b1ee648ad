"""The services' fixtures (tests/conftest.py offers them to every test): a private
redis-server and PostgreSQL for the session, a Redis key prefix and a database per
test, so that tests share the servers but nothing else.

Without the binaries or their Python clients these tests skip, saying what to
install; where they are demanded (JAXPLAY_SCALE_TESTS=require, or CI=true) they fail
instead (tests/gates.py)."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gates import skip_without_services
from tests.support.services import Postgres, RedisServer


def _missing_python() -> str | None:
    for module, package in (("redis", "redis"), ("psycopg", "psycopg[binary]")):
        try:
            __import__(module)
        except ImportError:
            return f"the Python package {package} is not installed (make setup)"
    return None


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    skip_without_services(_missing_python() or RedisServer.missing())
    directory = Path(tempfile.mkdtemp(prefix="jaxplay-redis-"))
    server = RedisServer(directory).start()
    yield server
    server.stop()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    skip_without_services(_missing_python() or Postgres.missing())
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
