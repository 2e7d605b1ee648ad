"""A request's choice of library versions through the API: the backends' listing of
what each version offers, the 422s, the pool each choice runs in, and the cache that
never serves one choice's answer to another.

The pools are fakes (one per (JAX version, choices), each saying in ``accepted`` what
an overlay zygote's hello would say) over a stamped environment and an overlay that is
only its stamp: the server's side. tests/pool/test_library_choices_jail.py runs the
real overlay in the jail."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.app.trust.cache import ResultCache
from sandbox.environments import libraries, library_choices
from sandbox.pool.versioned import VersionedPool
from sandbox.protocol import RunRequest

from .fakes import FakePool
from .test_versions import DEFAULT, NO_TIMING, Make, run, stamp

CODE = "def f(x):\n    return x\n"
VERSION = "0.12.0.1"  # the version the committed alternatives lock is for
ALT = library_choices.listed(VERSION)[0]
SET = libraries.offered(VERSION)  # its default set


def offering(tmp_path: Path) -> VersionedPool:
    """A versioned fake pool: the default (DEFAULT) and VERSION installed, VERSION's
    alternative's overlay installed; each overlay pool's worker says its versions."""
    root, libs = tmp_path / "versions", tmp_path / "libs"
    stamp(root, VERSION, python="3.13.0")
    where = library_choices.overlay_dir(VERSION, ALT, libs)
    where.mkdir(parents=True)
    (where / library_choices.STAMP).write_text(ALT.line + "\n")
    default = FakePool(max_concurrent=4)
    default.worker = dict(default.worker, jax_version=DEFAULT)

    def overlay_pool(base: Any, env: Any, overlay: tuple[str, ...]) -> FakePool:
        pool = base.for_environment(env)
        picked = libraries.overlaid(overlay) or {ALT.name: Path(overlay[0]).name.split("-")[-1]}
        pool.worker = dict(pool.worker, libraries={**SET, **picked})
        pool.overlay = overlay
        return pool

    return VersionedPool(
        default,
        default_version=DEFAULT,
        versions_dir=root,
        libs_dir=libs,
        make_overlay=overlay_pool,
    )


def test_backends_list_each_library_s_alternatives(make_client: Make, tmp_path: Path) -> None:
    pool = offering(tmp_path)
    client, _ = make_client(pool, jax_versions_dir=pool.versions_dir)
    run(client, {"code": CODE, "outputs": NO_TIMING})  # the server learns its worker
    rows = {
        v["version"]: v for v in client.get("/api/v1/backends").json()["backends"][0]["versions"]
    }
    listed = {lib["name"]: lib for lib in rows[VERSION]["libraries"]}
    assert listed[ALT.name] == {
        "name": ALT.name,
        "version": SET[ALT.name],  # the default
        "what": libraries.BY_NAME[ALT.name].what,
        "alternatives": [ALT.version],
    }
    assert all(lib["alternatives"] == [] for n, lib in listed.items() if n != ALT.name)
    # another version (not installed here) offers none
    assert all(lib["alternatives"] == [] for lib in rows["0.10.2"]["libraries"])


def test_a_choice_runs_in_a_pool_of_its_own_and_accepted_says_it(
    make_client: Make, tmp_path: Path
) -> None:
    pool = offering(tmp_path)
    client, _ = make_client(pool)
    body = {"code": CODE, "outputs": NO_TIMING, "jax_version": VERSION}
    chosen = run(client, {**body, "libraries": {ALT.name: ALT.version}})
    assert chosen[0]["worker"]["libraries"][ALT.name] == ALT.version
    plain = run(client, body)
    assert plain[0]["worker"].get("libraries", {}).get(ALT.name) != ALT.version
    # naming the default is the version's own pool; the choice's pool is started once
    named = run(client, {**body, "code": CODE + "\n", "libraries": {ALT.name: SET[ALT.name]}})
    assert named[0]["worker"].get("libraries", {}).get(ALT.name) != ALT.version
    again = run(client, {**body, "code": CODE + "\n\n", "libraries": {ALT.name: ALT.version}})
    assert again[0]["worker"]["libraries"][ALT.name] == ALT.version
    assert set(pool._pools) == {VERSION, f"{VERSION} {ALT.name}=={ALT.version}"}
    overlay = pool._pools[f"{VERSION} {ALT.name}=={ALT.version}"].overlay  # type: ignore[attr-defined]
    assert overlay == (str(library_choices.overlay_dir(VERSION, ALT, pool.libs_dir)),)


def test_a_version_not_offered_is_a_422_naming_what_is(make_client: Make, tmp_path: Path) -> None:
    client, pool = make_client(offering(tmp_path))
    body = {"code": CODE, "jax_version": VERSION}
    r = client.post("/api/v1/runs", json={**body, "libraries": {ALT.name: "0.0.1"}})
    assert r.status_code == 422 and r.json()["field"] == "libraries", r.text
    assert r.json()["message"] == (
        f"{ALT.name} 0.0.1 is not offered with jax {VERSION}; it offers "
        f"{ALT.name} {SET[ALT.name]} (default) or {ALT.version}"
    )
    r = client.post("/api/v1/runs", json={**body, "libraries": {"tensorflow": "2.0"}})
    assert r.status_code == 422 and "libraries" in r.text
    # the default version here is a fake with no library lock: it offers nothing
    r = client.post("/api/v1/runs", json={"code": CODE, "libraries": {ALT.name: ALT.version}})
    assert r.status_code == 422 and f"does not offer {ALT.name}" in r.json()["message"]
    assert pool.default.total == 0


def test_a_server_whose_pool_cannot_choose_refuses_a_choice(client: TestClient) -> None:
    r = client.post("/api/v1/runs", json={"code": CODE, "libraries": {ALT.name: ALT.version}})
    assert r.status_code == 422 and r.json()["field"] == "libraries"
    assert "default libraries" in r.json()["message"]


@pytest.mark.parametrize("slot_saw", ["the default's worker", "the choice's worker"])
def test_the_cache_never_serves_one_choice_s_answer_to_another(
    small_cache: ResultCache, slot_saw: str
) -> None:
    """An attacker runs the default optax until its answer is confirmed; a request for
    the alternative never gets it, whichever worker the server last saw for it."""
    cache = small_cache
    default_worker = {"backend": "cpu", "jax_version": VERSION, "libraries": dict(SET)}
    chosen_worker = dict(default_worker, libraries={**SET, ALT.name: ALT.version})
    plain = RunRequest(code=CODE, jax_version=VERSION)
    chosen = plain.model_copy(update={"libraries": {ALT.name: ALT.version}})
    events = [
        {"type": "accepted", "run_id": "r1", "worker": default_worker},
        {"type": "value", "pipeline": "main", "text": "1.0"},
        {"type": "done", "status": "ok"},
    ]

    async def scenario() -> tuple[str, str]:
        await cache._storage.open()
        cache.learn_worker(plain, default_worker)
        recorded = await cache.record(plain, "attacker", "r1", events)
        assert recorded is not None
        key = cache.key_for(plain)
        assert recorded.key == key
        await cache.record_pristine(plain, key, "r2", [dict(events[0], run_id="r2"), *events[1:]])
        hit, _ = await cache.lookup(plain, "someone")
        cache.learn_worker(chosen, default_worker if "default" in slot_saw else chosen_worker)
        found, answer = await cache.lookup(chosen, "victim")
        assert answer is None
        return hit, found

    hit, found = asyncio.run(scenario())
    assert hit == "hit"  # the default's answer is shared with the default's requests
    assert found == "missing"
