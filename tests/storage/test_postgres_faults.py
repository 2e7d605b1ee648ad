"""PostgreSQL stopped, started and killed under a server (issue 52): shares made while
it is down fail with a clear error and a ``Retry-After``, runs keep going, nothing
shared before is lost or changed, and the first share after it is back succeeds.

Each test has a cluster of its own (``durable``: a commit survives PostgreSQL's own
crash, as in production), since stopping the session's would fail its other users.
The long form of the same faults, under mixed traffic for half an hour, is
``benchmarks/server/soak.py``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.app.storage.base import canonical_json, snippet_digest
from backend.app.storage.url import open_storage
from sandbox.protocol import RunRequest
from tests.gates import skip_without_services
from tests.server.conftest import make_settings
from tests.server.fakes import FakePool
from tests.support.fixtures import _missing_python
from tests.support.services import Postgres

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]


@pytest.fixture
def pg() -> Iterator[Postgres]:
    skip_without_services(_missing_python() or Postgres.missing())
    server = Postgres(durable=True)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _database(pg: Postgres) -> str:
    return pg.create_database(f"f{uuid.uuid4().hex[:12]}")


def _request(i: int) -> dict[str, Any]:
    return {"code": f"def f(x):\n    return x * {i}\n", "args": "(2.0,)", "outputs": ["value"]}


@pytest.mark.parametrize("fault", ["stopped", "killed"])
def test_every_pooled_connection_broken_at_once_costs_no_call(pg: Postgres, fault: str) -> None:
    """The storage keeps several connections; PostgreSQL's restart breaks them all at
    once. The first call after it is back must not fail on them one after another."""
    url = _database(pg)

    async def go() -> None:
        store = open_storage(url)
        await store.open()
        digests = [
            snippet_digest(canonical_json(RunRequest.model_validate(_request(i)))) for i in range(8)
        ]
        # eight at once: the storage opens its every connection, all left idle
        ids = await asyncio.gather(*(store.put_snippet(d, f'"{i}"') for i, d in enumerate(digests)))
        await asyncio.to_thread(pg.halt if fault == "stopped" else pg.kill)
        with pytest.raises(Exception):  # noqa: B017 (whatever psycopg raises for it)
            await store.get_snippet(ids[0])
        await asyncio.to_thread(pg.resume)
        assert await store.get_snippet(ids[0]) == '"0"'
        assert await asyncio.gather(*(store.get_snippet(i) for i in ids)) == [
            f'"{n}"' for n in range(8)
        ]
        await store.close()

    asyncio.run(go())


@pytest.mark.parametrize("fault", ["stopped", "killed"])
def test_a_server_whose_postgres_goes_down_and_comes_back(
    pg: Postgres, fault: str, tmp_path: Path
) -> None:
    url = _database(pg)
    settings = make_settings(tmp_path, database_url=url, snippet_rate_per_minute=0)
    pool = FakePool(max_concurrent=4)
    with TestClient(create_app(settings, pool=pool, pool_name="fake")) as client:
        # Shares made before, several at once (the storage keeps several connections).
        with ThreadPoolExecutor(6) as threads:
            made = list(
                threads.map(lambda i: client.post("/api/v1/snippets", json=_request(i)), range(12))
            )
        assert [r.status_code for r in made] == [201] * 12, made[0].text
        before = {
            r.json()["id"]: client.get(f"/api/v1/snippets/{r.json()['id']}").json() for r in made
        }

        (pg.halt if fault == "stopped" else pg.kill)()

        # A share while it is down: a clear error, with when to try again.
        down = client.post("/api/v1/snippets", json=_request(100))
        assert down.status_code == 503, down.text
        assert down.json()["error"] == "storage_unavailable"
        assert "database" in down.json()["message"]
        assert int(down.headers["retry-after"]) >= 1
        # Reading a link is the same clear error, never a 500 nor a false 404.
        read = client.get(f"/api/v1/snippets/{next(iter(before))}")
        assert read.status_code == 503 and read.json()["error"] == "storage_unavailable"
        # Runs keep going: the cache is only skipped (nothing served, nothing kept).
        ran = client.post("/api/v1/runs", json=_request(200))
        assert ran.status_code == 200, ran.text
        assert ran.json()["events"][-1]["status"] == "ok"
        with client.websocket_connect("/api/v1/ws") as ws:
            assert ws.receive_json()["type"] == "hello"
            ws.send_json({"type": "run", "seq": 1, "payload": _request(201)})
            while (message := ws.receive_json())["payload"].get("type") != "done":
                assert message["type"] == "event", message
            assert message["payload"]["status"] == "ok"
        assert client.get("/healthz").status_code == 200

        pg.resume()

        # The first share after: it works at once (no broken connection left to fail on).
        again = client.post("/api/v1/snippets", json=_request(100))
        assert again.status_code == 201, again.text
        # None made before is lost or changed; the same content keeps its id.
        for snippet_id, stored in before.items():
            got = client.get(f"/api/v1/snippets/{snippet_id}")
            assert got.status_code == 200 and got.json() == stored
        for i, r in enumerate(made):
            assert client.post("/api/v1/snippets", json=_request(i)).json()["id"] == r.json()["id"]
