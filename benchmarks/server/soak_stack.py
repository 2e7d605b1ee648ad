"""What the soak runs against (benchmarks/server/soak.py), and its faults.

``serve``: one ``jaxplay serve`` with its jailed warm pool, on PostgreSQL. ``queue``:
the compose stack's shape on one machine — the server sending its runs through
Redis (append-only, as compose runs it) to a ``jaxplay worker`` with the jailed warm
pool, on PostgreSQL; no pristine pool on the server, as in docker/compose.yaml, so
nothing is served from the cache there.

Faults, each undone after ``outage_s``: ``stop`` (PostgreSQL stopped as an operator
does), ``kill`` (its postmaster SIGKILLed; the start runs crash recovery), and in the
queue stack ``redis`` (redis-server SIGKILLed, started again on its data) and
``worker`` (the worker SIGKILLed mid-run, its jails dying with it; started again).
"""

from __future__ import annotations

import json
import signal
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.server import soak_traffic as traffic
from benchmarks.server.soak_trend import process_kinds
from benchmarks.support import procfs
from tests.support.live_server import LiveServer
from tests.support.ports import wait_for
from tests.support.processes import Worker, descendants
from tests.support.services import Postgres, RedisServer

FAULTS = {"serve": ("stop", "kill"), "queue": ("stop", "kill", "redis", "worker")}
#: faults whose runs in flight may end killed or error (saying so): not failures
RUN_ENDING = frozenset({"redis", "worker"})


@dataclass
class Stack:
    kind: str
    pg: Postgres
    workdir: Path
    database: str = "soak"
    server: LiveServer | None = None
    redis: RedisServer | None = None
    worker: Worker | None = None
    prefix: str = field(default_factory=lambda: f"soak{uuid.uuid4().hex[:6]}")

    def start(self, pool: str, scripts: int, cache_entries: int) -> None:
        url = self.pg.create_database(self.database)
        tokens = [traffic.script_token(i) for i in range(scripts)] + [traffic.TOOLS_TOKEN]
        env = {
            "JAXPLAY_API_TOKENS": json.dumps(tokens),
            "JAXPLAY_TRUSTED_PROXIES": '["127.0.0.1"]',  # each simulated person its address
            # a cap the soak reaches, so the cache's trim runs all along (the default,
            # 10,000, takes hours to fill at this pace)
            "JAXPLAY_CACHE_MAX_ENTRIES": str(cache_entries),
        }
        extra = ["--unsafe-no-jail"] if pool == "subprocess" else []
        if self.kind == "queue":
            self.redis = RedisServer(self.workdir / "redis").start()
            self.worker = self._worker(pool).start().wait_registered(240)
            env |= {"JAXPLAY_QUEUE_URL": self.redis.url, "JAXPLAY_QUEUE_PREFIX": self.prefix}
            extra = []
        args = ["--pool", pool, *extra] if self.kind == "serve" else []
        self.server = LiveServer(url, *args, env=env, log=self.workdir / "server.log").start(240)

    def _worker(self, pool: str) -> Worker:
        assert self.redis is not None
        env = {  # the defaults, not the tests' fast ones
            "JAXPLAY_WORKER_HEARTBEAT_S": "2",
            "JAXPLAY_WORKER_DEAD_AFTER_S": "10",
            "JAXPLAY_LOG_LEVEL": "warning",
        }
        return Worker(self.redis.url, self.prefix, "soak-worker", self.workdir, pool=pool, env=env)

    def fault(self, kind: str) -> None:
        """Do ``kind`` (blocking)."""
        if kind == "stop":
            self.pg.halt()
        elif kind == "kill":
            self.pg.kill()
        elif kind == "redis":
            assert self.redis is not None
            self.redis.stop(signal.SIGKILL)
        elif kind == "worker":
            assert self.worker is not None
            self.worker.stop(signal.SIGKILL)

    def undo(self, kind: str) -> None:
        """Start again what ``fault(kind)`` took down (blocking)."""
        if kind in ("stop", "kill"):
            self.pg.resume()
        elif kind == "redis":
            assert self.redis is not None
            self.redis.start()
        elif kind == "worker":
            assert self.worker is not None
            # The dead worker's registration outlives it (until its heartbeat key
            # expires): wait for the new one's own.
            before = self.worker.registration()
            worker = self._worker(self.worker.argv[self.worker.argv.index("--pool") + 1])
            self.worker = worker.start()
            wait_for(
                lambda: (r := worker.registration()) is not None and r != before,
                240, "the restarted worker did not register", every_s=0.2,
            )  # fmt: skip

    def extra_sample(self) -> dict[str, float]:
        """The queue stack's own figures: the worker's memory, descriptors and jails,
        Redis's memory and keys (nothing while one is down)."""
        found: dict[str, float] = {}
        if self.worker is not None and self.worker.alive():
            pid = self.worker.pid
            status = procfs.status(pid)
            found["worker.rss_mb"] = status.get("VmRSS", 0) / 1024
            found["worker.fds"] = float(len(list(Path(f"/proc/{pid}/fd").iterdir())))
            kinds = process_kinds({p: (0, "") for p in descendants(pid)})
            found["worker.jails"] = float(kinds["jails"])
            found["worker.processes_jailed"] = float(kinds["jailed"])
        if self.redis is not None and self.redis.ping():
            info: dict[str, Any] = self.redis.client().info()
            found["redis.used_memory_mb"] = info["used_memory"] / 2**20
            found["redis.keys"] = float(self.redis.client().dbsize())
        return found

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(timeout_s=30)
        if self.worker is not None:
            self.worker.stop(timeout_s=30)
        if self.redis is not None:
            self.redis.stop()
        self.pg.stop()
