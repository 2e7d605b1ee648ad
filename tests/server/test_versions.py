"""JAX versions through the API: listing, choosing, refusing, caching, snippets.

The pools are fakes (sandbox.pool.fake, one per version, each reporting its version
in ``accepted``) over environments that are only stamp files: what is tested here is
the server's side. tests/pool/test_versions_jail.py runs real versions in the jail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from backend.app.storage.base import canonical_json, snippet_digest
from backend.app.trust.cache import ResultCache
from sandbox.environments import libraries
from sandbox.environments.versions import STAMP
from sandbox.pool.base import PoolFull
from sandbox.pool.versioned import VersionedPool
from sandbox.protocol import RunRequest

from .fakes import FakePool

CODE = "def f(x):\n    return x\n"
NO_TIMING = ["jaxpr", "value"]
DEFAULT = "0.99.0"  # the fake default pool reports it
Make = Callable[..., tuple[TestClient, Any]]


def stamp(root: Path, version: str, python: str = "3.11.7") -> None:
    """An environment that counts as installed (the fake pool never starts it)."""
    (root / version).mkdir(parents=True)
    (root / version / STAMP).write_text(
        json.dumps({"jax": version, "python": python, "base_prefix": "/nonexistent"})
    )


def versioned(root: Path, **options: Any) -> VersionedPool:
    default = FakePool(max_concurrent=4)
    default.worker = dict(default.worker, jax_version=DEFAULT)
    return VersionedPool(default, default_version=DEFAULT, versions_dir=root, **options)


def run(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    r = client.post("/api/v1/runs", json=body)
    assert r.status_code == 200, r.text
    return r.json()["events"]


def test_backends_list_every_version_installed_or_offered(
    make_client: Make, tmp_path: Path
) -> None:
    root = tmp_path / "versions"
    stamp(root, "0.10.2")
    (root / "0.7.2").mkdir(parents=True)  # half-made (no stamp): not installed
    client, _ = make_client(versioned(root), jax_versions_dir=root)
    run(client, {"code": CODE, "outputs": NO_TIMING})  # the server learns its worker
    backend = client.get("/api/v1/backends").json()["backends"][0]
    rows = {v["version"]: v for v in backend["versions"]}
    # each library with what it is, in the curated set's words (the page's popover)
    assert rows["0.10.2"]["libraries"][0] == {
        "name": "flax",
        "version": libraries.offered("0.10.2")["flax"],
        "what": libraries.BY_NAME["flax"].what,
        "alternatives": [],
    }
    libs = {v: {lib["name"]: lib["version"] for lib in rows[v].pop("libraries")} for v in rows}
    assert rows[DEFAULT] == {
        "version": DEFAULT,
        "installed": True,
        "default": True,
        "running": True,
    }
    assert rows["0.10.2"] == {
        "version": "0.10.2",
        "installed": True,
        "default": False,
        "running": False,
    }
    # each version's libraries, as its committed library lock pins them
    for version in ("0.10.2", "0.4.38"):
        assert libs[version] == libraries.offered(version), version
        assert {"flax", "optax", "equinox"} <= set(libs[version])
    assert libs["0.4.38"]["flax"] != libs["0.10.2"]["flax"]  # matched to its JAX
    assert libs[DEFAULT] == {}  # the fake's default has no lock: it offers none
    assert rows["0.7.2"]["installed"] is False and rows["0.4.38"]["installed"] is False
    assert backend["versions"][0]["version"] == "0.4.38"  # oldest first


def test_a_request_runs_on_the_version_it_names(make_client: Make, tmp_path: Path) -> None:
    root = tmp_path / "versions"
    stamp(root, "0.10.2")
    pool = versioned(root)
    client, _ = make_client(pool)
    default = run(client, {"code": CODE, "outputs": NO_TIMING})
    old = run(client, {"code": CODE, "outputs": NO_TIMING, "jax_version": "0.10.2"})
    assert default[0]["worker"]["jax_version"] == DEFAULT
    assert old[0]["worker"]["jax_version"] == "0.10.2"
    again = run(client, {"code": CODE, "outputs": NO_TIMING, "jax_version": "0.10.2"})
    assert again[0]["worker"]["jax_version"] == "0.10.2"
    assert pool.started_pools == 1  # started on demand, once
    backend = client.get("/api/v1/backends").json()["backends"][0]
    assert {v["version"]: v["running"] for v in backend["versions"]}["0.10.2"] is True
    # naming the default explicitly is the default's pool
    named = run(client, {"code": CODE + "\n", "outputs": NO_TIMING, "jax_version": DEFAULT})
    assert named[0]["worker"]["jax_version"] == DEFAULT and pool.started_pools == 1


def test_the_cache_keys_each_version_apart(small_cache: ResultCache) -> None:
    cache = small_cache
    default, old = RunRequest(code=CODE), RunRequest(code=CODE, jax_version="0.10.2")
    cache.learn_worker(default, {"backend": "cpu", "jax_version": DEFAULT})
    # what the default's worker is says nothing about 0.10.2's: no key until one is seen
    assert cache.key_for(default) is not None and cache.key_for(old) is None
    cache.learn_worker(old, {"backend": "cpu", "jax_version": "0.10.2"})
    assert cache.key_for(old) not in (None, cache.key_for(default))
    seen = {"backend": "cpu", "jax_version": DEFAULT}
    assert cache.workers() == {("auto", 1): seen, ("cpu", 1): seen}  # the default's only


def test_a_version_not_installed_is_a_422_naming_the_command(
    make_client: Make, tmp_path: Path
) -> None:
    client, _ = make_client(versioned(tmp_path / "versions"))
    r = client.post("/api/v1/runs", json={"code": CODE, "jax_version": "0.5.3"})
    assert r.status_code == 422 and r.json()["field"] == "jax_version"
    assert "jaxplay versions add 0.5.3" in r.json()["message"]
    r = client.post("/api/v1/runs", json={"code": CODE, "jax_version": "9.9.9"})
    assert r.status_code == 422 and "not offered" in r.json()["message"]
    assert "0.4.38" in r.json()["message"]
    r = client.post("/api/v1/runs", json={"code": CODE, "jax_version": "latest"})
    assert r.status_code == 422 and r.json()["field"] == "jax_version"


def test_the_websocket_refuses_a_version_not_installed(make_client: Make, tmp_path: Path) -> None:
    client, pool = make_client(versioned(tmp_path / "versions"))
    with client.websocket_connect("/api/v1/ws") as ws:
        ws.send_json({"type": "run", "seq": 1, "payload": {"code": CODE, "jax_version": "0.5.3"}})
        message = ws.receive_json()
        while message["type"] == "hello":
            message = ws.receive_json()
        assert message["type"] == "error", message
        assert "jaxplay versions add 0.5.3" in json.dumps(message)
    assert pool.default.total == 0


def test_an_idle_version_pool_is_closed_and_started_again(tmp_path: Path) -> None:
    root = tmp_path / "versions"
    stamp(root, "0.10.2")

    async def scenario() -> None:
        pool = versioned(root, idle_s=0.2)
        await pool.start()
        try:
            handle = await pool.submit(RunRequest(code=CODE, jax_version="0.10.2"), "t")
            events = [e async for e in handle.events()]
            assert events[0]["worker"]["jax_version"] == "0.10.2"
            first = pool._pools["0.10.2"]
            assert pool.running_versions() == [DEFAULT, "0.10.2"]
            deadline = time.monotonic() + 30  # idle 0.2 s, then closed: a generous bound
            while "0.10.2" in pool._pools and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert pool.running_versions() == [DEFAULT] and first.closed  # type: ignore[attr-defined]
            handle = await pool.submit(RunRequest(code=CODE, jax_version="0.10.2"), "t")
            _ = [e async for e in handle.events()]
            assert pool.started_pools == 2
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_only_runs_a_version_pool_took_keep_it_up(tmp_path: Path) -> None:
    """Issue 33, item 7: requests its pool refused (full), one every so often, do not
    keep an idle version pool (and its spares) up; it closes ``idle_s`` after its last
    run."""
    root = tmp_path / "versions"
    stamp(root, "0.10.2")

    async def scenario() -> None:
        pool = versioned(root, idle_s=0.5)
        await pool.start()
        try:
            request = RunRequest(code=CODE, jax_version="0.10.2")
            handle = await pool.submit(request, "t")
            _ = [e async for e in handle.events()]
            version_pool = pool._pools["0.10.2"]

            async def refuse(*args: Any, **kwargs: Any) -> Any:
                raise PoolFull(1.0)

            version_pool.submit = refuse  # type: ignore[method-assign]
            deadline = time.monotonic() + 30
            while "0.10.2" in pool._pools:
                assert time.monotonic() < deadline, "refused requests kept the pool up"
                with contextlib.suppress(PoolFull):
                    await pool.submit(request, "t")
                await asyncio.sleep(0.05)
            assert version_pool.closed  # type: ignore[attr-defined]
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_a_snippet_keeps_its_version_and_old_ids_stay_valid(
    make_client: Make, tmp_path: Path
) -> None:
    client, _ = make_client(versioned(tmp_path / "versions"))
    plain = client.post("/api/v1/snippets", json={"code": CODE}).json()["id"]
    pinned = client.post("/api/v1/snippets", json={"code": CODE, "jax_version": "0.10.2"}).json()
    assert pinned["id"] != plain
    assert client.get(f"/api/v1/snippets/{pinned['id']}").json()["jax_version"] == "0.10.2"
    # A snippet stored before requests could name a version: its canonical JSON has
    # no jax_version, and today's canonical form of the same request is the same text
    # (so the same id), and it still loads (as the default version).
    before = RunRequest(code=CODE).model_dump(mode="json")
    before.pop("jax_version")
    old_text = json.dumps(before, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(RunRequest(code=CODE)) == old_text
    assert snippet_digest(old_text).startswith(plain)
    assert client.get(f"/api/v1/snippets/{plain}").json().get("jax_version") is None


# --- across versions ---------------------------------------------------------------


def test_across_versions_says_where_each_output_changed(make_client: Make, tmp_path: Path) -> None:
    root = tmp_path / "versions"
    stamp(root, "0.10.2")
    stamp(root, "0.4.38")

    def make(base: Any, env: Any) -> Any:
        # the fake of 0.4.38 prints its jaxprs differently; the others alike
        pool = base.for_environment(env)
        script = pool.script
        if env.version == "0.4.38":
            pool.script = lambda run: [
                dict(e, text=e["text"] + "\n  # old") if e["type"] == "jaxpr" else e
                for e in script(run)
            ]
        return pool

    client, _ = make_client(versioned(root, make=make))
    body = {
        "request": {"code": CODE, "outputs": ["jaxpr", "value", "timing"]},
        "versions": [DEFAULT, "0.10.2", "0.4.38"],  # any order: compared oldest first
    }
    r = client.post("/api/v1/across", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert [v["version"] for v in answer["versions"]] == ["0.4.38", "0.10.2", DEFAULT]
    assert [v["jax_version"] for v in answer["versions"]] == ["0.4.38", "0.10.2", DEFAULT]
    assert all(v["status"] == "ok" for v in answer["versions"])
    outputs = {(o["output"], o["pipeline"]): o for o in answer["outputs"]}
    jaxpr = outputs[("jaxpr", "main")]
    assert jaxpr["first_changed"] == "0.10.2" and jaxpr["missing"] == []
    assert [(c["from"], c["to"]) for c in jaxpr["changes"]] == [("0.4.38", "0.10.2")]
    diff = jaxpr["changes"][0]["diff"]
    assert "--- 0.4.38" in diff and "+++ 0.10.2" in diff and "-  # old" in diff
    # each version's first run: "run 1" everywhere, so the value never changed
    assert outputs[("value", "main")]["first_changed"] is None
    assert [t["version"] for t in answer["times"]] == ["0.4.38", "0.10.2", DEFAULT]
    assert answer["times"][0]["trace_ms"] == 1.5 and answer["times"][0]["median_ms"] == {"f": 0.1}


def test_across_refuses_before_running_anything(make_client: Make, tmp_path: Path) -> None:
    client, pool = make_client(versioned(tmp_path / "versions"))
    r = client.post(
        "/api/v1/across", json={"request": {"code": CODE}, "versions": [DEFAULT, "0.5.3"]}
    )
    assert r.status_code == 422 and r.json()["field"] == "versions.1"
    assert "jaxplay versions add 0.5.3" in r.json()["message"]
    assert pool.default.total == 0
    for versions in ([DEFAULT], [DEFAULT, DEFAULT], [DEFAULT, "new"]):
        r = client.post("/api/v1/across", json={"request": {"code": CODE}, "versions": versions})
        assert r.status_code == 422 and r.json()["field"].startswith("versions"), r.text
    r = client.post(
        "/api/v1/across",
        json={"request": {"code": CODE, "jax_version": DEFAULT}, "versions": [DEFAULT, "0.4.38"]},
    )
    assert r.status_code == 422 and r.json()["field"] == "request.jax_version"


def test_across_diffs_outputs_missing_on_a_version() -> None:
    from backend.app.relay.compare import changes, summarize

    ok = [
        {"type": "accepted", "worker": {"jax_version": "0.4.38"}},
        {"type": "jaxpr", "pipeline": "main", "text": "{ lambda ; a. let b = sin a in (b,) }"},
        {"type": "done", "status": "ok"},
    ]
    failed = [
        {
            "type": "error",
            "pipeline": "main",
            "stage": "trace",
            "kind": "TypeError",
            "message": "no",
        },
        {"type": "done", "status": "error"},
    ]
    runs = [summarize("0.4.38", ok), summarize("0.10.2", failed)]
    assert runs[1].errors == {"main": "TypeError at trace: no"}
    (jaxpr,) = changes(runs)
    assert jaxpr["first_changed"] == "0.10.2" and jaxpr["missing"] == ["0.10.2"]
    assert "+++ 0.10.2 (not produced)" in jaxpr["changes"][0]["diff"]


# --- installing is an operator's act --------------------------------------------------------


def test_a_request_never_installs_a_version(
    make_client: Make, tmp_path: Path, monkeypatch: Any
) -> None:
    """An anonymous request naming an offered version that is not installed is a 422
    that says how an operator installs it, and starts no process (no pip): even with
    the setting that once installed on first use still in the environment."""
    import subprocess

    monkeypatch.setenv("JAXPLAY_JAX_VERSIONS_AUTO_INSTALL", "true")
    started: list[Any] = []

    class Recording(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            started.append(args)
            super().__init__(args, *rest, **kwargs)

    client, pool = make_client(versioned(tmp_path / "versions"))
    monkeypatch.setattr(subprocess, "Popen", Recording)
    for path, body in (
        ("/api/v1/runs", {"code": CODE, "jax_version": "0.5.3"}),
        ("/api/v1/across", {"request": {"code": CODE}, "versions": [DEFAULT, "0.5.3"]}),
    ):
        r = client.post(path, json=body)
        assert r.status_code == 422, r.text
        message = r.json()["message"]
        assert "not installed" in message and "an operator installs it" in message
        assert "`jaxplay versions add 0.5.3`" in message
    assert started == []
    assert not (tmp_path / "versions" / "0.5.3").exists()
    assert pool._pools == {} and pool.started_pools == 0


# --- across: the diffs off the event loop, under a budget -------------------------------------


def old_jaxpr(make_text: Callable[[str], str]) -> Callable[[Any, Any], Any]:
    """A ``make`` whose 0.4.38 fake prints ``make_text(jaxpr)`` instead of the jaxpr."""

    def make(base: Any, env: Any) -> Any:
        pool = base.for_environment(env)
        script = pool.script
        if env.version == "0.4.38":
            pool.script = lambda run: [
                dict(e, text=make_text(e["text"])) if e["type"] == "jaxpr" else e
                for e in script(run)
            ]
        return pool

    return make


def test_across_diffs_run_off_the_event_loop(
    make_client: Make, tmp_path: Path, monkeypatch: Any
) -> None:
    """While an across request's diff is provably in progress (its process has said
    so and waits for the test's word), /healthz answers; then the diff completes."""
    import sys
    import threading

    from backend.app.relay import compare as across

    root = tmp_path / "versions"
    stamp(root, "0.4.38")
    started, release = tmp_path / "diff-started", tmp_path / "diff-release"
    real = across.diff_command()
    gate = (
        "import os, sys, time\n"
        f"open({str(started)!r}, 'w').close()\n"
        f"while not os.path.exists({str(release)!r}): time.sleep(0.01)\n"
        f"os.execv(sys.executable, {real!r})\n"
    )
    monkeypatch.setattr(across, "diff_command", lambda: [sys.executable, "-c", gate])
    client, _ = make_client(versioned(root, make=old_jaxpr(lambda t: t + "\n  # old")))
    answer: dict[str, Any] = {}
    body = {"request": {"code": CODE, "outputs": NO_TIMING}, "versions": [DEFAULT, "0.4.38"]}
    thread = threading.Thread(
        target=lambda: answer.update(r=client.post("/api/v1/across", json=body))
    )
    thread.start()
    try:
        for _ in range(3000):  # the diff process has started (up to 30 s)
            if started.exists():
                break
            thread.join(0.01)
        assert started.exists(), "the diff process never started"
        for _ in range(3):
            assert client.get("/healthz").status_code == 200
        assert "r" not in answer, "the across answer came before its diff was made"
    finally:
        release.touch()
        thread.join(60)
    r = answer["r"]
    assert r.status_code == 200, r.text
    jaxpr = {(o["output"], o["pipeline"]): o for o in r.json()["outputs"]}[("jaxpr", "main")]
    assert "-  # old" in jaxpr["changes"][0]["diff"]


def test_across_cuts_an_oversized_diff_with_a_message(make_client: Make, tmp_path: Path) -> None:
    root = tmp_path / "versions"
    stamp(root, "0.4.38")
    big = "".join(f"  line {i} {'x' * 40}\n" for i in range(20_000))  # ~1 MiB
    client, _ = make_client(versioned(root, make=old_jaxpr(lambda t: big)))  # the default cap
    body = {"request": {"code": CODE, "outputs": NO_TIMING}, "versions": [DEFAULT, "0.4.38"]}
    r = client.post("/api/v1/across", json=body)
    assert r.status_code == 200, r.text
    jaxpr = {(o["output"], o["pipeline"]): o for o in r.json()["outputs"]}[("jaxpr", "main")]
    assert jaxpr["first_changed"] == DEFAULT  # where it changed is still said
    diff = jaxpr["changes"][0]["diff"]
    assert diff.startswith("(not diffed: ") and "over the 524288 the server diffs" in diff


def test_across_cuts_diffs_that_run_out_of_time(
    make_client: Make, tmp_path: Path, monkeypatch: Any
) -> None:
    import sys

    from backend.app.relay import compare as across

    root = tmp_path / "versions"
    stamp(root, "0.4.38")
    # a diff process that never answers: the budget's time ends it
    monkeypatch.setattr(
        across, "diff_command", lambda: [sys.executable, "-c", "import time; time.sleep(600)"]
    )
    client, _ = make_client(
        versioned(root, make=old_jaxpr(lambda t: t + "\n  # old")), across_diff_s=0.5
    )
    body = {"request": {"code": CODE, "outputs": NO_TIMING}, "versions": [DEFAULT, "0.4.38"]}
    r = client.post("/api/v1/across", json=body)
    assert r.status_code == 200, r.text
    jaxpr = {(o["output"], o["pipeline"]): o for o in r.json()["outputs"]}[("jaxpr", "main")]
    assert jaxpr["first_changed"] == DEFAULT
    assert "ran out of the server's 0.5 s for them" in jaxpr["changes"][0]["diff"]


class Leaving:
    """A POST straight to the app (on the TestClient's loop) whose client goes away
    when the test says: what a TestClient cannot do."""

    def __init__(self, client: TestClient, path: str, body: dict[str, Any]) -> None:
        self.client, self.sent = client, []
        self.body = json.dumps(body).encode()
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"testserver"), (b"content-type", b"application/json")],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        self.leave = asyncio.Event()
        self._read = False

    async def receive(self) -> dict[str, Any]:
        if not self._read:
            self._read = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def start(self) -> asyncio.Task[None]:
        return asyncio.create_task(self.client.app(self.scope, self.receive, self.send))  # type: ignore[arg-type]


async def until(check: Callable[[], bool], what: str) -> None:
    for _ in range(3000):  # up to 30 s
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


def test_across_runs_are_cancelled_when_the_client_leaves(
    make_client: Make, tmp_path: Path
) -> None:
    """The client goes away while the first version's run is running: that run ends
    cancelled and no later version's run starts."""
    root = tmp_path / "versions"
    stamp(root, "0.4.38")
    pool = versioned(root)
    client, _ = make_client(pool)
    call = Leaving(
        client,
        "/api/v1/across",
        {"request": {"code": CODE + "# fake: hang\n"}, "versions": [DEFAULT, "0.4.38"]},
    )

    async def scenario() -> None:
        task = call.start()
        await until(
            lambda: "0.4.38" in pool._pools and pool._pools["0.4.38"].running == 1,
            "the oldest version's run is running",
        )
        old = pool._pools["0.4.38"]
        call.leave.set()
        await asyncio.wait_for(task, 30)
        assert old.running == 0 and old.total == 1
        assert pool.default.total == 0, "a later version's run started after the client left"

    assert client.portal is not None
    client.portal.call(scenario)
    assert call.sent and call.sent[0]["status"] == 499


def test_an_across_run_waiting_for_a_place_stops_when_the_client_leaves(
    make_client: Make, tmp_path: Path
) -> None:
    """The oldest version's pool is full (one place, held by another client's run):
    the across request's run waits for it; its client leaves; it stops waiting and
    never runs."""
    root = tmp_path / "versions"
    stamp(root, "0.4.38")
    pool = versioned(root)
    pool.default.capacity = 1  # and so the other version's fake, made from it
    client, _ = make_client(pool)
    holder = Leaving(
        client, "/api/v1/runs", {"code": CODE + "# fake: hang\n", "jax_version": "0.4.38"}
    )
    call = Leaving(
        client, "/api/v1/across", {"request": {"code": CODE}, "versions": [DEFAULT, "0.4.38"]}
    )
    services = client.app.state.services  # type: ignore[attr-defined]

    async def scenario() -> None:
        held = holder.start()
        await until(
            lambda: "0.4.38" in pool._pools and pool._pools["0.4.38"].running == 1,
            "the other client's run holds the place",
        )
        task = call.start()
        await until(lambda: services.admission.queue_length() == 1, "the across run waits")
        call.leave.set()
        await asyncio.wait_for(task, 30)
        assert services.admission.queue_length() == 0
        old = pool._pools["0.4.38"]
        assert old.total == 1 and pool.default.total == 0, "the across run ran"
        holder.leave.set()
        await asyncio.wait_for(held, 30)

    assert client.portal is not None
    client.portal.call(scenario)
    assert call.sent and call.sent[0]["status"] in (499, 503)


def test_across_compares_a_text_in_parts_whole() -> None:
    # a big program's HLO comes in parts: its versions differ only past the first part
    from backend.app.relay.compare import changes, summarize
    from sandbox.engine.core.text_parts import ir_events
    from sandbox.protocol.limits import TEXT_PART_CHARS

    base = "".join(
        f"  %{i} = f32[3] add(%{i - 1}, %{i - 1})\n" for i in range(TEXT_PART_CHARS // 30)
    )
    runs = []
    for version, tail in (
        ("0.4.38", "  ROOT %r = f32[3] tanh(%1)\n"),
        ("0.10.2", "  ROOT %r = f32[3] sin(%1)\n"),
    ):
        parts = [{**e, "pipeline": "main"} for e in ir_events("hlo", base + tail, [])]
        assert len(parts) > 1
        runs.append(summarize(version, [*parts, {"type": "done", "status": "ok"}]))
    assert runs[0].outputs[("hlo", "main")] == base + "  ROOT %r = f32[3] tanh(%1)\n"
    (hlo,) = changes(runs)
    assert hlo["first_changed"] == "0.10.2"
    assert "+  ROOT %r = f32[3] sin(%1)" in hlo["changes"][0]["diff"]
