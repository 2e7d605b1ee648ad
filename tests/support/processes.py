"""jaxplay processes around a queue: ``jaxplay worker`` (Worker) and a server that
sends its runs through Redis (QueueServer, a LiveServer), as the compose file runs
them; and what is alive under a process."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.support.live_server import LiveServer
from tests.support.ports import free_port, wait_for
from tests.support.process import Process

#: Fast failure detection for tests: a worker is dead after 2 s without heartbeat.
FAST = {
    "JAXPLAY_WORKER_HEARTBEAT_S": "0.5",
    "JAXPLAY_WORKER_DEAD_AFTER_S": "2",
    "JAXPLAY_LOG_FORMAT": "text",
    "JAXPLAY_LOG_LEVEL": "info",
}


class Worker(Process):
    def __init__(
        self,
        redis_url: str,
        prefix: str,
        worker_id: str,
        log_dir: Path,
        *,
        pool: str = "fake",
        backend: str = "cpu",
        env: dict[str, str] | None = None,
    ) -> None:
        self.id, self.redis_url, self.prefix = worker_id, redis_url, prefix
        argv = [
            sys.executable, "-m", "backend.cli.worker",
            "--queue", redis_url, "--prefix", prefix, "--id", worker_id,
            "--backend", backend, "--pool", pool,
        ]  # fmt: skip
        super().__init__(argv, {**os.environ, **FAST, **(env or {})}, log_dir / f"{worker_id}.log")

    def registration(self) -> dict[str, Any] | None:
        import redis

        try:
            value = redis.from_url(self.redis_url, decode_responses=True).get(
                f"{self.prefix}:worker:{self.id}"
            )
        except redis.RedisError:
            return None
        return None if value is None else dict(json.loads(value))

    def wait_registered(self, timeout_s: float = 90.0) -> Worker:
        def check() -> Any:
            if not self.alive():
                raise RuntimeError(f"worker {self.id} exited: {self.tail()}")
            return self.registration()

        wait_for(check, timeout_s, f"worker {self.id} did not register", every_s=0.1)
        return self


#: API tokens the test servers issued: two tenants, for the result cache's two runs
SCALE_TOKENS = ["scale-tenant-a-0123456789", "scale-tenant-b-0123456789"]


class QueueServer(LiveServer):
    """A ``jaxplay serve`` replica whose runs go through Redis to the workers."""

    def __init__(
        self,
        redis_url: str,
        prefix: str,
        database_url: str,
        log_dir: Path,
        *,
        env: dict[str, str] | None = None,
    ) -> None:
        port = free_port()
        settings = {
            **FAST,
            "JAXPLAY_QUEUE_URL": redis_url,
            "JAXPLAY_QUEUE_PREFIX": prefix,
            "JAXPLAY_PROBE_ON_START": "false",
            "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
            "JAXPLAY_MAX_RUNS_PER_TENANT": "16",
            "JAXPLAY_MAX_RUNS_PER_CLIENT": "16",  # every test client is 127.0.0.1
            "JAXPLAY_API_TOKENS": json.dumps(SCALE_TOKENS),
            "JAXPLAY_FRONTEND_DIST": str(log_dir / "no-dist"),
            "JAXPLAY_LOG_LEVEL": "warning",
            # The Redis pool makes no pristine runs (a remote worker's word is no
            # evidence): the server's own pool makes them, here the fake like the workers.
            "JAXPLAY_PRISTINE_POOL": "fake",
            **(env or {}),
        }
        super().__init__(
            database_url,
            env=settings,
            port=port,
            log=log_dir / f"server-{port}.log",
            new_session=True,
        )


def descendants(pid: int) -> set[int]:
    """Every process under ``pid`` now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
