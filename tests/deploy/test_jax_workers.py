"""Real JAX through Redis: a server and two ``jaxplay worker`` processes, each with the
jailed warm pool (small: one run at a time), as the compose file runs them. What the
worker returns is exactly what a local run returns; a worker killed mid-run takes
its jails with it and its run ends ``killed``."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import httpx
import pytest

from tests.conftest import run_events
from tests.gates import needs_jail
from tests.support.ports import wait_for
from tests.support.processes import QueueServer, Worker, alive, descendants
from tests.support.services import Postgres, RedisServer

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow, needs_jail]

#: the jailed warm pool, as small as it goes: one zygote ready, one run at a time
SMALL_POOL = {
    "JAXPLAY_POOL_SIZE": "2",
    "JAXPLAY_POOL_RUNNING": "1",
    "JAXPLAY_POOL_SPARES": "1",
    "JAXPLAY_POOL_PER_TENANT": "1",
}
REQUEST: dict[str, Any] = {
    "code": "import jax.numpy as jnp\n\ndef f(x, y):\n    return jnp.sum(jnp.tanh(x @ y) ** 2)\n",
    "args": "(jnp.ones((4, 4)), jnp.ones((4, 4)))",
    "transforms": [{"name": "grad", "argnums": 0}, {"name": "jit"}],
    "outputs": ["jaxpr", "stablehlo", "value"],
}


class Cluster:
    def __init__(self, workers: list[Worker], server: QueueServer) -> None:
        self.workers, self.server = workers, server


@pytest.fixture(scope="module")
def cluster(
    redis_server: RedisServer, postgres: Postgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    log_dir = tmp_path_factory.mktemp("jax")
    prefix = f"jax{uuid.uuid4().hex[:6]}"
    # The jailed pool, always: without bubblewrap these tests skip (needs_jail), or fail
    # the session where the jail is demanded (CI); never the unjailed fallback.
    env = dict(SMALL_POOL)
    workers = [
        Worker(redis_server.url, prefix, name, log_dir, pool="auto", env=env).start()
        for name in ("jw1", "jw2")
    ]
    server = QueueServer(
        redis_server.url, prefix, postgres.create_database(f"j{uuid.uuid4().hex[:8]}"), log_dir
    ).launch()
    try:
        for w in workers:
            w.wait_registered(120)
        server.wait_ready()
        yield Cluster(workers, server)
    except BaseException:
        for p in [*workers, server]:
            print(f"--- {p.log.name}\n{p.tail()}")
        raise
    finally:
        for p in [server, *workers]:
            p.stop()


def test_real_runs_are_what_a_local_run_gives(cluster: Cluster) -> None:
    t0 = time.monotonic()
    r = httpx.post(
        cluster.server.url + "/api/v1/runs", json={**REQUEST, "cache": False}, timeout=60
    )
    remote_s = time.monotonic() - t0
    remote = r.json()["events"]
    assert remote[-1]["status"] == "ok", remote[-1]
    local = run_events(REQUEST)
    for kind in ("jaxpr", "stablehlo"):
        (a,) = [e["text"] for e in remote if e["type"] == kind]
        (b,) = [e["text"] for e in local if e["type"] == kind]
        assert a == b, kind
    (value,) = [e for e in remote if e["type"] == "value"]
    (expected,) = [e for e in local if e["type"] == "value"]
    assert [leaf["sha256"] for leaf in value["tree"]] == [
        leaf["sha256"] for leaf in expected["tree"]
    ]
    worker = remote[0]["worker"]
    assert worker["jax_version"] == version("jax") and worker["platform"] == "cpu"
    backends = httpx.get(cluster.server.url + "/api/v1/backends").json()["backends"]
    assert backends[0]["jax_version"] == version("jax") and backends[0]["capacity"] == 2
    # warm: the same tenant's zygote again, nothing cached
    times = []
    for i in range(3):
        t0 = time.monotonic()
        again = httpx.post(
            cluster.server.url + "/api/v1/runs",
            json={**REQUEST, "code": REQUEST["code"] + f"# {i}\n", "cache": False},
            timeout=60,
        ).json()["events"]
        times.append(time.monotonic() - t0)
        assert again[-1]["status"] == "ok"
    print(
        f"real grad+jit run through Redis: first {remote_s * 1000:.0f} ms, then "
        + ", ".join(f"{t * 1000:.0f}" for t in times)
        + " ms"
    )


def test_a_real_worker_killed_mid_run_takes_its_jails_with_it(cluster: Cluster) -> None:
    body = {"code": "import time\ntime.sleep(30)\n\ndef f():\n    return 0\n", "timeout_s": 40}
    events: list[dict[str, Any]] = []
    victim: Worker | None = None
    jails: set[int] = set()
    killed_at = 0.0
    with httpx.stream(
        "POST",
        cluster.server.url + "/api/v1/runs",
        json=body,
        headers={"Accept": "application/x-ndjson"},
        timeout=60,
    ) as response:
        for line in response.iter_lines():
            if not line:
                continue
            events.append(json.loads(line))
            if victim is None:
                victim = _owner(cluster, response.headers["x-run-id"])
                jails = descendants(victim.pid)
                assert jails, "the worker has no jail processes?"
                os.kill(victim.pid, signal.SIGKILL)
                killed_at = time.monotonic()
    assert victim is not None
    done = events[-1]
    assert done["status"] == "killed" and f"({victim.id}) was lost" in done["reason"], done
    # ended by the loss (the reason above), long before its own sleep or wall clock would
    assert time.monotonic() - killed_at < 25
    wait_for(lambda: not any(alive(p) for p in jails), 5, "the killed worker's jails to be gone")
    victim.stop()
    ok = httpx.post(
        cluster.server.url + "/api/v1/runs",
        json={"code": "def f():\n    return 1\n", "cache": False},
        timeout=60,
    ).json()["events"]
    assert ok[-1]["status"] == "ok"


def _owner(cluster: Cluster, run_id: str) -> Worker:
    import redis

    w0 = cluster.workers[0]
    client = redis.from_url(w0.redis_url, decode_responses=True)
    owner = wait_for(
        lambda: client.hget(f"{w0.prefix}:run:{run_id}", "owner"), 10, "an owner for the run"
    )
    return next(w for w in cluster.workers if w.id == owner)


def test_the_workers_run_user_code_in_the_jail(cluster: Cluster) -> None:
    """The workers' pool is the jailed one: the run sees the jail's hostname and
    none of the worker's environment."""
    code = (
        "import os, socket\n"
        "print(socket.gethostname(), 'JAXPLAY_WORKER_HEARTBEAT_S' in os.environ)\n\n"
        "def f():\n    return 0\n"
    )
    events = httpx.post(
        cluster.server.url + "/api/v1/runs", json={"code": code, "cache": False}, timeout=60
    ).json()["events"]
    assert events[-1]["status"] == "ok", events[-1]
    out = "".join(e["text"] for e in events if e["type"] == "stdout")
    assert out.strip() == "sandbox False", out


def test_nothing_left_behind(cluster: Cluster) -> None:
    """After the runs: no job waits, and the dead worker is gone from the registry."""
    import redis

    w = next(w for w in cluster.workers if w.alive())
    client = redis.from_url(w.redis_url, decode_responses=True)
    # The dead worker's job leaves the stream when a live worker reclaims it (XAUTOCLAIM
    # after JAXPLAY_WORKER_DEAD_AFTER_S idle), which may come after the next run ended.
    wait_for(lambda: client.xlen(f"{w.prefix}:jobs:cpu") == 0, 10, "no job left in the stream")
    wait_for(
        lambda: (
            httpx.get(cluster.server.url + "/api/v1/backends").json()["backends"][0]["capacity"]
            == 1
        ),
        30,  # the dead worker is dropped 2 s after its last heartbeat; generous when busy
        "one worker left in /api/v1/backends",
    )
    assert client.smembers(f"{w.prefix}:workers") == {w.id}
