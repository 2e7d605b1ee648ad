"""Private ``redis-server`` and PostgreSQL instances for the tests that need them.

Each service runs from a temporary directory on a free loopback port and is gone at
the end. PostgreSQL refuses to run as root, so as root it runs as ``postgres``
(``runuser``). Nothing here touches a system-wide Redis or PostgreSQL. Their session
fixtures, and the gates that skip or fail without them: fixtures.py.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.support.ports import free_port, wait_for

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
