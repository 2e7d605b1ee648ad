"""The compose topology, as processes on this machine: two ``jaxplay serve`` replicas
sharing Redis and PostgreSQL, and ``jaxplay worker`` processes (the fake pool here:
no JAX, so what is measured is the plumbing; tests/deploy/test_jax_workers.py runs real JAX
through the same path). Workers are dead after 2 s without a heartbeat."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.ports import wait_for
from tests.support.processes import SCALE_TOKENS, QueueServer, Worker
from tests.support.services import Postgres, RedisServer

pytestmark = pytest.mark.timeout(120)

NDJSON = {"Accept": "application/x-ndjson"}


class Topology:
    def __init__(self, redis: RedisServer, database_url: str, log_dir: Path) -> None:
        self.redis, self.database_url, self.log_dir = redis, database_url, log_dir
        self.prefix = f"topo{uuid.uuid4().hex[:6]}"
        self.servers: list[QueueServer] = []
        self.workers: list[Worker] = []

    def add_worker(self, name: str, **kwargs: Any) -> Worker:
        w = Worker(self.redis.url, self.prefix, name, self.log_dir, **kwargs).start()
        self.workers.append(w)
        return w

    def add_server(self, **env: str) -> QueueServer:
        s = QueueServer(
            self.redis.url, self.prefix, self.database_url, self.log_dir, env=env
        ).launch()
        self.servers.append(s)
        return s

    def stop(self) -> None:
        for p in [*self.servers, *self.workers]:
            p.stop()

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.log.name}\n{p.tail(1500)}" for p in [*self.servers, *self.workers]
        )


SERVER_ENV = {"JAXPLAY_MAX_QUEUE": "2", "JAXPLAY_QUEUE_TIMEOUT_S": "3"}


@pytest.fixture(scope="module")
def topology(
    redis_server: RedisServer, postgres: Postgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Topology]:
    database = postgres.create_database(f"topo{uuid.uuid4().hex[:8]}")
    topo = Topology(redis_server, database, tmp_path_factory.mktemp("topology"))
    try:
        workers = [topo.add_worker("w1"), topo.add_worker("w2")]
        servers = [topo.add_server(**SERVER_ENV), topo.add_server(**SERVER_ENV)]
        for w in workers:
            w.wait_registered()
        for s in servers:
            s.wait_ready()
        yield topo
    except BaseException:
        print(topo.logs())
        raise
    finally:
        topo.stop()


def code(marker: str = "") -> str:
    """Code no run has had before (nothing comes from the result cache)."""
    return f"def f():\n    return 0\n# {uuid.uuid4().hex}\n{marker}"


def run(
    server: QueueServer,
    body: dict[str, Any],
    timeout_s: float = 30,
    token: str | None = None,
    retry_busy_for_s: float = 0,
) -> list[dict[str, Any]]:
    """The run's events. With ``retry_busy_for_s``, a 503 server_busy is retried after
    its Retry-After for that long, as the API contract asks of clients: with
    JAXPLAY_MAX_QUEUE=2, a burst larger than the workers can take at once is refused by
    design whenever the workers are slow to claim jobs (a loaded machine), which a test
    about routing rather than admission must not mistake for a fault."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    give_up = time.monotonic() + retry_busy_for_s
    while True:
        r = httpx.post(server.url + "/api/v1/runs", json=body, timeout=timeout_s, headers=headers)
        if r.status_code != 503 or time.monotonic() >= give_up:
            assert r.status_code == 200, r.text
            return list(r.json()["events"])
        assert r.json()["error"] == "server_busy", r.text
        time.sleep(float(r.headers["retry-after"]))


def stream(
    server: QueueServer, body: dict[str, Any]
) -> Iterator[tuple[httpx.Response, dict[str, Any]]]:
    with httpx.stream(
        "POST", server.url + "/api/v1/runs", json=body, headers=NDJSON, timeout=30
    ) as r:
        for line in r.iter_lines():
            if line:
                yield r, json.loads(line)


def test_runs_through_both_replicas_reach_both_workers(topology: Topology) -> None:
    s1, s2 = topology.servers

    def one(server: QueueServer) -> list[dict[str, Any]]:
        body = {"code": code("# fake: slow=0.1\n"), "outputs": ["jaxpr"]}
        return run(server, body, retry_busy_for_s=60)

    # a failed run's own assertion is raised here, as map's results are read
    with ThreadPoolExecutor(8) as side_by_side:
        results = list(side_by_side.map(one, [s1, s2] * 4))
    assert all(r[-1]["status"] == "ok" and r[0]["type"] == "accepted" for r in results)
    # both workers served runs (their registrations count them at each heartbeat)
    wait_for(
        lambda: all((w.registration() or {}).get("runs", 0) > 0 for w in topology.workers),
        5,
        "both workers to have run something",
    )


def test_a_run_submitted_through_one_replica_is_watched_through_the_other(
    topology: Topology,
) -> None:
    s1, s2 = topology.servers
    body = {"code": code("# fake: slow=0.2\n")}
    seen: list[dict[str, Any]] = []
    watched: list[dict[str, Any]] = []
    watcher: threading.Thread | None = None

    def watch(run_id: str) -> None:
        with httpx.stream("GET", f"{s2.url}/api/v1/runs/{run_id}/events", timeout=30) as r:
            assert r.status_code == 200
            watched.extend(json.loads(line) for line in r.iter_lines() if line)

    for response, event in stream(s1, body):
        seen.append(event)
        if watcher is None:
            run_id = response.headers["x-run-id"]
            assert event["type"] == "accepted" and event["run_id"] == run_id
            watcher = threading.Thread(target=watch, args=(run_id,))
            watcher.start()  # joins mid-run: replays the start, then follows
    assert watcher is not None
    watcher.join(30)
    assert seen[-1]["status"] == "ok"
    assert watched == seen
    # and afterwards, replayed whole
    r = httpx.get(f"{s2.url}/api/v1/runs/{seen[0]['run_id']}/events", timeout=10)
    assert [json.loads(line) for line in r.text.splitlines()] == seen
    assert httpx.get(f"{s2.url}/api/v1/runs/{'0' * 32}/events").status_code == 404


def test_snippets_saved_on_one_replica_open_on_the_other(topology: Topology) -> None:
    s1, s2 = topology.servers
    body = {"code": code(), "transforms": [{"name": "grad"}]}
    created = httpx.post(s1.url + "/api/v1/snippets", json=body)
    assert created.status_code == 201
    snippet_id = created.json()["id"]
    got = httpx.get(f"{s2.url}/api/v1/snippets/{snippet_id}")
    assert got.status_code == 200 and got.json()["code"] == body["code"]
    assert httpx.post(s2.url + "/api/v1/snippets", json=body).json()["id"] == snippet_id
    assert httpx.get(f"{s2.url}/s/{snippet_id}").status_code == 200


def test_the_cache_is_shared_by_the_replicas(topology: Topology) -> None:
    s1, s2 = topology.servers
    body = {"code": code(), "outputs": ["jaxpr", "value"]}
    run(s2, {"code": code(), "outputs": ["jaxpr"]})  # s2 meets the workers
    # A tenant's run on one replica leaves a candidate; another tenant asking on the
    # other replica asks for that replica's pristine run (in its own pool: the Redis
    # workers' word is no evidence) and runs at once; the pristine run confirms it;
    # then either replica answers.
    first = run(s1, body, token=SCALE_TOKENS[0])
    second = run(s2, body, token=SCALE_TOKENS[1])
    assert "cached" not in first[0] and "cached" not in second[0]
    deadline = time.monotonic() + 120  # a pristine run's fresh jail, on a loaded machine
    while (
        'jaxplay_pristine_runs_total{outcome="confirmed"} 1.0'
        not in httpx.get(s2.url + "/metrics", timeout=10).text
    ):
        assert time.monotonic() < deadline, "no pristine run confirmed the answer"
        time.sleep(0.2)
    for server in (s1, s2):
        assert run(server, body)[0].get("cached") is True


def test_backends_show_the_registered_workers(topology: Topology) -> None:
    for server in topology.servers:
        rows = httpx.get(server.url + "/api/v1/backends").json()["backends"]
        assert [r["name"] for r in rows] == ["cpu"]
        (row,) = rows
        assert row["pool"] == "redis" and row["backend"] == "cpu"
        assert row["jax_version"] == "0.0.fake" and row["devices"] == 1
        assert row["capacity"] == 4  # two workers, two runs each
        # the queue's length is the pool's view of Redis, refreshed each second: one
        # taken at an earlier test's last run may still count it for that long
        wait_for(
            lambda url=server.url: _cpu_row(url)["queue_length"] == 0,
            5,
            f"{server.url}'s backends row to say that no run waits",
        )
    metrics = httpx.get(topology.servers[0].url + "/metrics").text
    assert 'jaxplay_pool{figure="workers"} 2.0' in metrics


def _cpu_row(url: str) -> dict[str, Any]:
    (row,) = httpx.get(url + "/api/v1/backends").json()["backends"]
    return dict(row)


def test_cancel_reaches_the_worker_on_another_machine(topology: Topology) -> None:
    from websockets.sync.client import connect

    s1 = topology.servers[0]
    with connect(s1.url.replace("http", "ws") + "/api/v1/ws") as ws:
        assert json.loads(ws.recv())["type"] == "hello"
        ws.send(json.dumps({"type": "run", "seq": 1, "payload": {"code": code("# fake: hang\n")}}))
        first = json.loads(ws.recv())
        assert first["payload"]["type"] == "accepted"
        ws.send(json.dumps({"type": "cancel", "seq": 1}))
        while True:
            message = json.loads(ws.recv(timeout=10))
            if message["payload"]["type"] == "done":
                break
        assert message["payload"]["status"] == "cancelled"
        assert message["payload"]["reason"] == "cancelled by the client"  # the worker's own
        # (a hung run: only the cancel ends it, within recv's 10 s; how soon: benchmarks/)


def test_back_pressure_when_the_queue_is_full(topology: Topology) -> None:
    """4 runs fill the two workers, 2 fill the Redis queue (JAXPLAY_MAX_QUEUE=2); the
    next wait in the replica's own queue and are told 503 with Retry-After."""
    s1, s2 = topology.servers
    clients = [httpx.Client(timeout=30) for _ in range(6)]
    streams = []
    try:
        for i, c in enumerate(clients):
            server = (s1, s2)[i % 2]
            req = c.build_request(
                "POST",
                server.url + "/api/v1/runs",
                json={"code": code("# fake: hang\n")},
                headers=NDJSON,
            )
            r = c.send(req, stream=True)
            assert r.status_code == 200
            streams.append(r)
        wait_for(
            lambda: _backend(s1)["queue_length"] >= 2 and _backend(s1)["running"] == 4,
            30,
            "two runs waiting and four running",
            every_s=0.2,
        )
        # refused after the replica's queue wait (JAXPLAY_QUEUE_TIMEOUT_S, 3 s), while
        # the runs ahead hang: a 503, never a wait for them
        refused = httpx.post(s2.url + "/api/v1/runs", json={"code": code()}, timeout=30)
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["retry-after"]) >= 1
    finally:
        for r in streams:
            r.close()  # the client leaves: the server cancels its run on the worker
        for c in clients:
            c.close()
    # every hung run was cancelled on its worker, the queued ones taken off the queue
    wait_for(
        lambda: _backend(s1)["running"] == 0 and _backend(s1)["queue_length"] == 0,
        10,
        "the workers to be free again",
        every_s=0.2,
    )
    assert run(s1, {"code": code()})[-1]["status"] == "ok"


def _backend(server: QueueServer) -> dict[str, Any]:
    rows = httpx.get(server.url + "/api/v1/backends").json()["backends"]
    return dict(rows[0]) if rows else {"queue_length": 0, "running": 0}


def test_a_worker_killed_mid_run(topology: Topology) -> None:
    """SIGKILL the worker running a run: the run ends ``killed``, saying the worker was
    lost, within the heartbeat timeout; the next run goes to the worker that is left."""
    s1 = topology.servers[0]
    redis = topology.redis.client()
    events: list[dict[str, Any]] = []
    killed_at = 0.0
    victim: Worker | None = None
    for response, event in stream(s1, {"code": code("# fake: slow=1\n")}):
        events.append(event)
        if victim is None:
            owner = redis.hget(f"{topology.prefix}:run:{response.headers['x-run-id']}", "owner")
            victim = next(w for w in topology.workers if w.id == owner)
            os.kill(victim.pid, signal.SIGKILL)
            killed_at = time.monotonic()
    ended = time.monotonic() - killed_at
    done = events[-1]
    assert victim is not None
    assert done["type"] == "done" and done["status"] == "killed", events
    assert f"({victim.id}) was lost" in done["reason"]
    # dead after 2 s without heartbeat (the reason says so); nothing else would end it.
    # A generous bound: how soon it is seen is a benchmark's figure, not a test's.
    assert ended < 30
    victim.stop()
    topology.workers.remove(victim)
    for _ in range(3):
        assert run(s1, {"code": code()})[-1]["status"] == "ok"
    replacement = topology.add_worker(f"{victim.id}b")
    replacement.wait_registered()


def test_redis_restarted_workers_and_servers_reconnect(postgres: Postgres, tmp_path: Path) -> None:
    """Its own Redis (append-only, as in compose), stopped and started again on the same
    port while a run is in flight: the run still ends, and the next runs work."""
    redis = RedisServer(tmp_path / "redis").start()
    topo = Topology(redis, postgres.create_database(f"r{uuid.uuid4().hex[:8]}"), tmp_path)
    try:
        worker = topo.add_worker("rw")
        server = topo.add_server()
        worker.wait_registered()
        server.wait_ready()
        assert run(server, {"code": code()})[-1]["status"] == "ok"
        result: list[list[dict[str, Any]]] = []
        flight = threading.Thread(
            target=lambda: result.append(run(server, {"code": code("# fake: slow=2\n")}))
        )
        flight.start()
        # in flight (the worker runs it, 6 s in all), whatever the machine's load
        wait_for(lambda: _backend(server)["running"] >= 1, 30, "the run to start", every_s=0.1)
        redis.stop()  # SIGTERM: Redis writes its append-only file and exits
        time.sleep(1.0)
        redis.start()
        flight.join(60)
        assert result and result[0][-1]["type"] == "done"
        assert result[0][-1]["status"] == "ok", result[0][-1]
        assert [e["type"] for e in result[0]] == ["accepted", "stage", "jaxpr", "value", "done"]
        wait_for(worker.registration, 5, "the worker to register again")
        for _ in range(3):
            assert run(server, {"code": code()})[-1]["status"] == "ok"
        assert httpx.get(server.url + "/api/v1/backends").json()["backends"][0]["capacity"] == 2
    except BaseException:
        print(topo.logs())
        raise
    finally:
        topo.stop()
        redis.stop()
