"""Private ``redis-server`` and PostgreSQL instances for the scale tests, and the
jaxplay processes (servers, workers) that run against them.

Each service runs from a temporary directory on a free loopback port and is gone at
the end. PostgreSQL refuses to run as root, so as root it runs as ``postgres``
(``runuser``). Nothing here touches a system-wide Redis or PostgreSQL.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Self

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Any, timeout_s: float, what: str, every_s: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout_s:g} s")
        time.sleep(every_s)


# --- Redis ---------------------------------------------------------------------------


class RedisServer:
    """``redis-server`` with append-only persistence (as docker/compose.yaml runs it)."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.binary = shutil.which("redis-server")
        self.dir = directory
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def missing(cls) -> str | None:
        if shutil.which("redis-server") is None:
            return "redis-server is not installed (apt-get install redis-server)"
        return None

    def start(self) -> RedisServer:
        assert self.binary
        self.dir.mkdir(parents=True, exist_ok=True)
        argv = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--logfile", str(self.dir / "redis.log"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.ping, 10, f"redis-server on port {self.port} did not answer")
        return self

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def client(self) -> Any:
        import redis

        return redis.Redis(port=self.port, decode_responses=True)


# --- PostgreSQL ----------------------------------------------------------------------


def _pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


class Postgres:
    """A throwaway cluster: ``initdb`` in a temporary directory, trust auth on loopback."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="jaxplay-pg-"))
        self.data = self.dir / "data"
        self.user: str | None = None
        self.admin_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @classmethod
    def missing(cls) -> str | None:
        if _pg_bin("initdb") is None or _pg_bin("pg_ctl") is None:
            return "PostgreSQL is not installed (apt-get install postgresql)"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no 'postgres' user to run PostgreSQL as"
            if shutil.which("runuser") is None:
                return "runuser is missing (util-linux)"
        return None

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        result = subprocess.run(
            [*prefix, *argv], capture_output=True, text=True, timeout=120, cwd=self.dir
        )
        if result.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {result.stdout[-2000:]} {result.stderr[-2000:]}")

    def start(self) -> Postgres:
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
        assert initdb and pg_ctl
        self._run(
            initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust",
            "-E", "UTF8", "--no-sync", "--no-instructions",
        )  # fmt: skip
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200 -c shared_buffers=32MB"
        )
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.dir / "pg.log"), "-o", options,
                  "-w", "-t", "60", "start")  # fmt: skip
        return self

    def stop(self) -> None:
        pg_ctl = _pg_bin("pg_ctl")
        if pg_ctl and (self.data / "postmaster.pid").exists():
            try:
                self._run(pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop")
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self) -> None:
        pg_ctl = _pg_bin("pg_ctl")
        assert pg_ctl
        # -l again: without it the server would write to (and hold open) our pipe
        self._run(
            pg_ctl, "-D", str(self.data), "-l", str(self.dir / "pg.log"), "-m", "fast", "-w",
            "restart",
        )  # fmt: skip

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"


# --- jaxplay processes ---------------------------------------------------------------

#: Fast failure detection for tests: a worker is dead after 2 s without heartbeat.
FAST = {
    "JAXPLAY_WORKER_HEARTBEAT_S": "0.5",
    "JAXPLAY_WORKER_DEAD_AFTER_S": "2",
    "JAXPLAY_LOG_FORMAT": "text",
    "JAXPLAY_LOG_LEVEL": "info",
}


class Process:
    """A ``jaxplay serve`` or ``jaxplay worker`` in a child process, logging to a file."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.argv, self.env, self.log = argv, env, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv, cwd=ROOT, env=self.env, stdout=out, stderr=out, start_new_session=True
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text()[-n:]
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        return code


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
            sys.executable, "-m", "backend.worker_cli",
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


class Server(Process):
    def __init__(
        self,
        redis_url: str,
        prefix: str,
        database_url: str,
        log_dir: Path,
        *,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [
            sys.executable, "-m", "backend.serve_cli",
            "--port", str(self.port), "--database-url", database_url,
        ]  # fmt: skip
        settings = {
            "JAXPLAY_QUEUE_URL": redis_url,
            "JAXPLAY_QUEUE_PREFIX": prefix,
            "JAXPLAY_PROBE_ON_START": "false",
            "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
            "JAXPLAY_MAX_RUNS_PER_TENANT": "16",
            "JAXPLAY_MAX_RUNS_PER_CLIENT": "16",  # every test client is 127.0.0.1
            "JAXPLAY_API_TOKENS": json.dumps(SCALE_TOKENS),
            "JAXPLAY_FRONTEND_DIST": str(log_dir / "no-dist"),
            "JAXPLAY_LOG_LEVEL": "warning",
            "JAXPLAY_METRICS_PUBLIC": "true",  # off by default; the topology test reads it
            # The Redis pool makes no pristine runs (a remote worker's word is no
            # evidence): the server's own pool makes them, here the fake like the workers.
            "JAXPLAY_PRISTINE_POOL": "fake",
        }
        super().__init__(
            argv,
            {**os.environ, **FAST, **settings, **(env or {})},
            log_dir / f"server-{self.port}.log",
        )

    def wait_ready(self, timeout_s: float = 60.0) -> Server:
        def check() -> bool:
            if not self.alive():
                raise RuntimeError(f"the server exited: {self.tail()}")
            try:
                return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(check, timeout_s, "the server did not start", every_s=0.1)
        return self


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
