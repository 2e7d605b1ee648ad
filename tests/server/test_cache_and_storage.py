"""The result cache (never a wrong answer) and the snippet store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from backend.app.cache import is_deterministic
from backend.app.storage import MIN_ID_LENGTH, SqliteStorage, canonical_json, snippet_digest
from sandbox.protocol import RunRequest

from .fakes import FakePool

CODE = "def f(x):\n    return x\n"
Make = Callable[..., tuple[TestClient, FakePool]]
NO_TIMING = ["jaxpr", "stablehlo", "hlo", "value", "cost"]


def events(client: TestClient, body: dict[str, Any], **params: Any) -> list[dict[str, Any]]:
    r = client.post("/api/v1/runs", json=body, params=params)
    assert r.status_code == 200, r.text
    return r.json()["events"]


def value(evs: list[dict[str, Any]]) -> str:
    return next(e["repr"] for e in evs if e["type"] == "value")


def test_a_repeated_run_is_answered_from_the_cache(make_client: Make) -> None:
    client, pool = make_client()
    body = {"code": CODE, "outputs": NO_TIMING}
    first = events(client, body)
    second = events(client, body)
    assert pool.total == 1
    assert second[0]["cached"] is True and second[-1]["cached"] is True
    assert second[0]["worker"] == first[0]["worker"] and second[0]["run_id"] != first[0]["run_id"]
    strip = {"run_id", "cached"}
    kept = [
        {k: v for k, v in e.items() if k not in strip}
        for e in first
        if e["type"] in ("accepted", "jaxpr", "value")
    ]
    assert [{k: v for k, v in e.items() if k not in strip} for e in second[:-1]] == kept
    assert not any(e["type"] in ("stage", "timing") for e in second)
    # timeout_s cannot change an output: same key.
    assert events(client, dict(body, timeout_s=3))[0].get("cached") is True


def test_timings_are_never_cached(make_client: Make) -> None:
    client, pool = make_client()
    body = {"code": CODE}  # all outputs, timing among them
    first = events(client, body)
    second = events(client, body)
    assert pool.total == 2 and pool.requests[1].outputs == ["timing"]
    assert second[0]["cached"] is True and value(second) == value(first)
    timing = [e for e in second if e["type"] == "timing"]
    assert timing and timing[0]["rows"][0]["runs"] == 2  # measured again, by run 2


def test_what_can_change_an_output_changes_the_key(make_client: Make) -> None:
    client, _pool = make_client()
    base = {"code": CODE, "outputs": NO_TIMING}
    events(client, base)
    for variant in (
        {"code": CODE + "# another\n"},
        {"args": "(2.0,)"},
        {"transforms": [{"name": "grad"}]},
        {"config": {"jax_enable_x64": True}},
        {"devices": 2},
        {"backend": "cpu"},
        {"outputs": ["jaxpr"]},
        {"compare": [[{"name": "jit"}]]},
    ):
        evs = events(client, {**base, **variant})
        assert "cached" not in evs[0], variant
    assert events(client, base)[0]["cached"] is True


def test_a_new_jax_version_is_a_miss(make_client: Make) -> None:
    client, pool = make_client()
    body = {"code": CODE, "outputs": NO_TIMING}
    events(client, body)
    pool.worker = dict(pool.worker, jax_version="0.0.newer")
    # The server only knows of the new worker once it sees it: the old answer is still
    # served (it says which worker made it) until then.
    events(client, body, cache="false")
    fresh = events(client, body)
    assert "cached" not in fresh[0] and fresh[0]["worker"]["jax_version"] == "0.0.newer"
    assert events(client, body)[0]["worker"]["jax_version"] == "0.0.newer"


def test_failures_and_nondeterminism_are_not_cached(make_client: Make) -> None:
    client, _pool = make_client()
    for body in (
        {"code": CODE + "# fake: error\n", "outputs": NO_TIMING},
        {"code": CODE + "# fake: nodone\n", "outputs": NO_TIMING},
        {
            "code": "import numpy as np\ndef f(x):\n    return x\n",
            "args": "(np.random.rand(3),)",
            "outputs": NO_TIMING,
        },
        {"code": "import time\ndef f(x):\n    return x * time.time()\n", "outputs": NO_TIMING},
    ):
        events(client, body)
        assert "cached" not in events(client, body)[0], body


def test_the_cache_can_be_bypassed(make_client: Make) -> None:
    client, pool = make_client()
    body = {"code": CODE, "outputs": NO_TIMING}
    events(client, body)
    assert "cached" not in events(client, {**body, "cache": False})[0]
    assert "cached" not in events(client, body, cache="false")[0]
    assert pool.total == 3


def test_the_cache_outlives_a_restart_but_only_for_a_worker_seen_again(make_client: Make) -> None:
    body = {"code": CODE, "outputs": NO_TIMING}
    client, _ = make_client()
    events(client, body)
    client2, _pool2 = make_client()  # same database
    assert "cached" not in events(client2, body)[0]  # the new server has not seen its worker yet
    assert events(client2, body)[0]["cached"] is True


def test_determinism_check() -> None:
    def req(code: str, args: str = "()") -> RunRequest:
        return RunRequest.model_validate({"code": code, "args": args})

    assert is_deterministic(
        req("import jax\ndef f(k):\n    return jax.random.normal(k)\n", "(jax.random.key(0),)")
    )
    assert not is_deterministic(req("import random\ndef f():\n    return random.random()\n"))
    assert not is_deterministic(req("def f(x):\n    return x\n", "(np.random.rand(2),)"))
    assert not is_deterministic(req("import os\ndef f():\n    return len(os.environ)\n"))


# --- the snippet store ---------------------------------------------------------------


def test_snippet_ids_extend_until_unique(tmp_path: Path) -> None:
    async def go() -> None:
        store = SqliteStorage(str(tmp_path / "s.sqlite3"))
        await store.open()
        a = await store.put_snippet("abcdefgh" + "x" * 44, "{}")
        b = await store.put_snippet("abcdefgh" + "y" * 44, "{}")
        c = await store.put_snippet("abcdefgh" + "x" * 44, "{}")
        assert (a, b, c) == ("abcdefgh", "abcdefghy", "abcdefgh")
        assert await store.get_snippet("abcdefghy") == "{}"
        await store.close()
        # WAL mode, and it survives reopening.
        store2 = SqliteStorage(str(tmp_path / "s.sqlite3"))
        await store2.open()
        assert await store2.get_snippet("abcdefgh") == "{}"
        await store2.close()

    asyncio.run(go())
    assert (tmp_path / "s.sqlite3-wal").exists() or (tmp_path / "s.sqlite3").exists()


def test_the_snippet_hash_is_versioned_and_canonical() -> None:
    a = RunRequest.model_validate({"code": CODE})
    b = RunRequest.model_validate({"entry": "f", "code": CODE, "timeout_s": 20})
    assert canonical_json(a) == canonical_json(b)
    digest = snippet_digest(canonical_json(a))
    assert len(digest) >= MIN_ID_LENGTH and digest.isalnum() and digest == digest.lower()
    assert snippet_digest(canonical_json(a), fmt=2) != digest


def test_what_the_server_saw_of_a_worker_expires(make_client: Make) -> None:
    client, pool = make_client(cache_worker_ttl_s=0.05)
    body = {"code": CODE, "outputs": NO_TIMING}
    events(client, body)
    import time

    time.sleep(0.1)
    pool.worker = dict(pool.worker, jax_version="0.0.upgraded-in-place")
    evs = events(client, body)
    assert "cached" not in evs[0] and evs[0]["worker"]["jax_version"] == "0.0.upgraded-in-place"


def test_the_same_request_at_once_runs_once(make_client: Make) -> None:
    import threading

    client, pool = make_client()
    events(
        client, {"code": "def g():\n    return 0\n", "outputs": NO_TIMING}
    )  # the server meets its worker
    body = {"code": CODE + "# fake: slow=0.1\n", "outputs": NO_TIMING}
    answers: list[list[dict[str, Any]]] = []
    threads = [
        threading.Thread(target=lambda: answers.append(events(client, body))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert pool.total == 2  # the warm-up and one run for all four
    assert sorted(bool(a[0].get("cached")) for a in answers) == [False, True, True, True]
    assert len({value(a) for a in answers}) == 1
