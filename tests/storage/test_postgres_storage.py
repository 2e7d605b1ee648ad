"""The storage promises, on SQLite and on PostgreSQL alike (the same tests, both
backends), and what only a shared database must add: replicas writing at once,
migrations, a database restart."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.app.storage.base import (
    PRISTINE,
    CacheLimits,
    ResultRecord,
    RunRow,
    Storage,
    canonical_json,
    snippet_digest,
)
from backend.app.storage.url import open_storage
from sandbox.protocol import RunRequest
from tests.server.conftest import make_settings
from tests.server.fakes import FakePool
from tests.support.services import Postgres

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jaxplay.sqlite3'}"
    return str(request.getfixturevalue("pg_url"))


def run(fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> Any:
    return asyncio.run(fn(*args))


async def opened(url: str) -> Storage:
    store = open_storage(url)
    await store.open()
    return store


def test_snippet_ids_extend_until_unique_and_survive_reopening(url: str) -> None:
    async def go() -> None:
        store = await opened(url)
        a = await store.put_snippet("abcdefgh" + "x" * 44, '{"a":1}')
        b = await store.put_snippet("abcdefgh" + "y" * 44, '{"b":2}')
        c = await store.put_snippet("abcdefgh" + "x" * 44, '{"a":1}')
        assert (a, b, c) == ("abcdefgh", "abcdefghy", "abcdefgh")
        assert await store.get_snippet("abcdefghy") == '{"b":2}'
        assert await store.get_snippet("nosuchid") is None
        await store.close()
        again = await opened(url)
        assert await again.get_snippet("abcdefgh") == '{"a":1}'
        assert await again.put_snippet("abcdefgh" + "y" * 44, '{"b":2}') == "abcdefghy"
        await again.close()

    run(go)


def test_the_result_cache_rule_and_trim(url: str) -> None:
    """A candidate is confirmed only by a pristine run's equal one (whose body is then
    kept), never by another tenant's; a tenant's different one changes nothing, a
    pristine run's takes its place; two pristine runs that disagree make the key
    unstable for good; every write trims candidates first, a group to its quota, unstable
    markers to theirs (the same statements on SQLite and PostgreSQL)."""

    async def go() -> None:
        store = await opened(url)
        roomy = CacheLimits(max_entries=100, max_bytes=1 << 20)

        async def put(key: str, digest: str, tenant: str, body: str = "b", limits: CacheLimits = roomy, group: str = "g") -> str:  # fmt: skip
            state, _ = await store.record_result(key, ResultRecord(digest, tenant, body, group=group), limits)  # fmt: skip
            return state

        assert await put("k", "same", "a", body="first") == "candidate"
        assert await put("k", "same", "a") == "candidate"
        assert await put("k", "same", "b", body="second") == "candidate"  # a tenant: no
        assert await put("k", "same", PRISTINE, body="pristine") == "confirmed"
        found = await store.get_result("k")
        assert found is not None and found.state == "confirmed" and found.body == "pristine"
        assert await put("k", "other", "c") == "confirmed"  # a tenant's word alone: no
        assert await put("k", "other", PRISTINE) == "unstable"
        assert await put("k", "same", PRISTINE) == "unstable"
        found = await store.get_result("k")
        assert found is not None and (found.state, found.body) == ("unstable", "")
        assert await store.get_result("missing") is None
        # A contradiction asks, the pristine run decides: a tenant contradicting a
        # candidate changes nothing; a pristine run that disagrees takes its place,
        # and a second pristine run confirms it, or makes the key unstable.
        assert await put("j", "x", "a", body="forged") == "candidate"
        assert await put("j", "y", "b") == "candidate"
        assert await put("j", "y", PRISTINE, body="honest") == "candidate"
        found = await store.get_result("j")
        assert found is not None and (found.tenant, found.body) == (PRISTINE, "honest")
        assert await put("j", "y", PRISTINE, body="honest") == "confirmed"
        assert await put("h", "x", "a") == "candidate"
        assert await put("h", "y", PRISTINE) == "candidate"
        assert await put("h", "z", PRISTINE) == "unstable"
        # Every write trims: at most 10 entries, and at most 8 KiB of them.
        tight = CacheLimits(max_entries=10, max_bytes=8 * 1024)
        for i in range(30):
            await put(f"r{i:03}", "d", "a", body="x" * 1000, limits=tight, group=f"g{i}")
        kept = [await store.get_result(f"r{i:03}") for i in range(30)]
        assert kept[-1] is not None and kept[0] is None
        assert sum(v is not None for v in kept) <= 6  # 8 KiB / (1000 + 256) bytes
        # A group keeps at most its quota of candidates, its oldest going first.
        quota = CacheLimits(max_entries=100, max_bytes=1 << 20, candidates_per_group=3)
        for i in range(6):
            await put(f"q{i}", "d", "a", limits=quota, group="flooder")
        held = [await store.get_result(f"q{i}") for i in range(6)]
        assert [h is not None for h in held] == [False] * 3 + [True] * 3
        # Unstable markers are kept to their own cap, oldest going first.
        few = CacheLimits(max_entries=100, max_bytes=1 << 20, max_unstable=2)
        for i in range(4):  # two pristine runs that disagree
            await put(f"u{i}", "d", PRISTINE, limits=few)
            await put(f"u{i}", "e", PRISTINE, limits=few)
        marks = [await store.get_result(f"u{i}") for i in range(4)]
        assert [m.state if m else None for m in marks][1:] == [None, "unstable", "unstable"]
        await store.close()

    run(go)


def test_replicas_storing_at_once_agree_on_ids(url: str) -> None:
    """Two servers (two storages on one database) store snippets at the same moment."""

    async def go() -> None:
        a, b = await opened(url), await opened(url)
        same = "samepref" + "s" * 44
        ids = await asyncio.gather(*(s.put_snippet(same, "{}") for s in (a, b, a, b)))
        assert set(ids) == {"samepref"}
        # different content, the same 8-character prefix: one each, both kept
        one, two = "clashing" + "1" * 44, "clashing" + "2" * 44
        got = await asyncio.gather(a.put_snippet(one, '"1"'), b.put_snippet(two, '"2"'))
        assert sorted(map(len, got)) == [8, 9] and all(g.startswith("clashing") for g in got)
        assert {await a.get_snippet(got[0]), await b.get_snippet(got[1])} == {'"1"', '"2"'}
        assert await a.put_snippet(two, '"2"') == got[1]
        await a.close()
        await b.close()

    run(go)


def test_the_app_keeps_snippets_and_results_in_it(url: str, tmp_path: Path) -> None:
    """The server's own snippet and cache paths, over this storage."""
    body = {"code": "def f(x):\n    return x\n", "outputs": ["jaxpr", "value"]}

    tokens = ["tenant-a-0123456789", "tenant-b-0123456789"]
    a, b = ({"Authorization": f"Bearer {t}"} for t in tokens)

    def client() -> tuple[TestClient, FakePool]:
        pool = FakePool(max_concurrent=4)
        settings = make_settings(
            tmp_path, database_url=url, api_tokens=tokens, pristine_concurrency=1
        )
        app = create_app(settings, pool=pool, pool_name="fake")
        return TestClient(app), pool

    c1, pool1 = client()
    with c1:
        created = c1.post("/api/v1/snippets", json=body)
        assert created.status_code == 201, created.text
        first = c1.post("/api/v1/runs", json=body, headers=a).json()["events"]
        # another tenant asks: its request asks for the server's pristine run and runs
        # at once; the pristine run confirms it, and the next request is served it
        second = c1.post("/api/v1/runs", json=body, headers=b).json()["events"]
        assert "cached" not in second[0]
        confirmer = c1.app.state.services.runs.confirmer  # type: ignore[attr-defined]
        deadline = time.monotonic() + 30
        while confirmer.stats().get("confirmed", 0) < 1:
            assert time.monotonic() < deadline, confirmer.stats()
            time.sleep(0.01)
        third = c1.post("/api/v1/runs", json=body).json()["events"]
        assert pool1.total == 3 and sorted(pool1.pristine) == [False, False, True]
        assert third[0]["cached"] is True
        assert [e["type"] for e in third] == [e["type"] for e in first if e["type"] != "stage"]
    c2, pool2 = client()  # another replica, or the same after a restart
    with c2:
        snippet = c2.get(f"/api/v1/snippets/{created.json()['id']}")
        assert snippet.status_code == 200
        # as stored: every default filled in, less jax_version when not set (docs/api.md)
        stored = RunRequest.model_validate(body).model_dump(mode="json", exclude={"jax_version"})
        assert snippet.json() == stored
        assert c2.post("/api/v1/snippets", json=body).json()["id"] == created.json()["id"]
        c2.post(
            "/api/v1/runs", json={**body, "code": "def g():\n    return 1\n"}
        )  # meets its worker
        assert c2.post("/api/v1/runs", json=body).json()["events"][0]["cached"] is True
        assert pool2.total == 1


# --- PostgreSQL only ---------------------------------------------------------------


def test_migrations_run_once_even_when_replicas_start_together(pg_url: str) -> None:
    import psycopg

    async def go() -> None:
        stores = [open_storage(pg_url) for _ in range(3)]
        await asyncio.gather(*(s.open() for s in stores))
        for s in stores:
            await s.close()

    run(go)
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT version, name FROM jaxplay_migrations").fetchall()
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        }
    assert rows == [
        (1, "initial"),
        (2, "agreeing_cache"),
        (3, "pristine_cache"),
        (4, "run_stats"),
    ]
    assert {"snippets", "cache_results", "jaxplay_migrations", "run_stats"} <= tables
    assert "results" not in tables  # the old cache (format 1) is dropped


def test_a_database_from_a_newer_jaxplay_is_refused(pg_url: str) -> None:
    import psycopg

    run(lambda: opened(pg_url))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO jaxplay_migrations VALUES (999, 'future', 0)")
    with pytest.raises(Exception, match="newer than this jaxplay"):
        run(opened, pg_url)


def test_storage_survives_a_postgres_restart(pg_url: str, postgres: Postgres) -> None:
    async def go() -> None:
        store = await opened(pg_url)
        digest = snippet_digest(canonical_json(RunRequest.model_validate({"code": "x = 1\n"})))
        sid = await store.put_snippet(digest, "{}")
        await asyncio.to_thread(postgres.restart)
        # the connection it held broke: the call is tried again on a fresh one
        assert await store.get_snippet(sid) == "{}"
        assert await store.put_snippet(digest, "{}") == sid
        await store.close()

    run(go)


def test_settings_accept_a_postgresql_url(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, database_url="postgresql://u:p@db:5432/jaxplay")
    assert settings.database_url.startswith("postgresql://")
    with pytest.raises(ValueError, match="database_url"):
        make_settings(tmp_path, database_url="mysql://db/jaxplay")


def test_the_database_password_never_reaches_the_logs(
    pg_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The server logs where its database is at start-up, without the password (the
    test database trusts local connections, so any password opens it)."""
    url = pg_url.replace("postgres@", "postgres:pg-s3cret-pw@", 1)
    settings = make_settings(tmp_path, database_url=url, log_level="info")
    app = create_app(settings, pool=FakePool(max_concurrent=1), pool_name="fake")
    with caplog.at_level(logging.INFO, logger="jaxplay"), TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
    started = [r for r in caplog.records if r.getMessage() == "server.start"]
    assert started and started[0].fields["database"].endswith(url.split("@", 1)[1])  # type: ignore[attr-defined]
    assert "pg-s3cret-pw" not in caplog.text
    assert all("pg-s3cret-pw" not in str(getattr(r, "fields", "")) for r in caplog.records)


def test_run_figures_are_kept_two_days_and_shared_by_replicas(url: str) -> None:
    """The public figures' rows (backend/app/relay/figures.py): two replicas write, either
    reads both; rows before ``keep_since`` go."""

    async def go() -> None:
        a, b = await opened(url), await opened(url)
        await a.record_runs([RunRow(100.0, "0.4.38", True, "ok", 12.5)], keep_since=0.0)
        await b.record_runs([RunRow(200.0, "0.12.0.1", False, "error", None)], keep_since=0.0)
        assert await a.run_rows(0.0) == [
            RunRow(100.0, "0.4.38", True, "ok", 12.5),
            RunRow(200.0, "0.12.0.1", False, "error", None),
        ]
        assert await b.run_rows(150.0) == [RunRow(200.0, "0.12.0.1", False, "error", None)]
        await a.record_runs([RunRow(300.0, "0.4.38", False, "ok", 7.0)], keep_since=150.0)
        assert [r.at for r in await b.run_rows(0.0)] == [200.0, 300.0]
        await a.close()
        await b.close()

    run(go)
