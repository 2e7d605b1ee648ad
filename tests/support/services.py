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
import time
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

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable  # every commit survives PostgreSQL's crash (the faults')
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
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.dir / "pg.log"),
                  "-o", self._options(), "-w", "-t", "60", "start")  # fmt: skip
        return self

    def _options(self) -> str:
        # fsync off: a process's crash (the faults tried here) loses nothing the OS
        # holds; synchronous_commit is what keeps a commit a crash of PostgreSQL
        # itself cannot take back, so a ``durable`` cluster keeps it on
        commit = "on" if self.durable else "off"
        return (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
            f"-c fsync=off -c synchronous_commit={commit} -c full_page_writes=off "
            "-c max_connections=200 -c shared_buffers=32MB"
        )

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

    # --- faults (tests/storage/test_postgres_faults.py, benchmarks/server/soak.py) ----------

    def halt(self) -> None:
        """Stop it as an operator does (``pg_ctl stop -m fast``), keeping its data."""
        pg_ctl = _pg_bin("pg_ctl")
        assert pg_ctl
        self._run(pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start it again on its data, port and options (after ``halt`` or ``kill``)."""
        pg_ctl = _pg_bin("pg_ctl")
        assert pg_ctl
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.dir / "pg.log"),
                  "-o", self._options(), "-w", "-t", "60", "start")  # fmt: skip

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])

    def kill(self, timeout_s: float = 20.0) -> None:
        """SIGKILL the postmaster, as the OOM killer or a crash does: its backends see
        it gone and exit on their own (waited for, so that ``resume`` can start over
        the same shared memory; any still there after ``timeout_s`` is SIGKILLed too).
        The next start runs crash recovery."""
        pid = self.postmaster_pid()
        children = [
            int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == pid
        ]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout_s
        for child in [pid, *children]:
            while Path(f"/proc/{child}").exists() and _state(child) != "Z":
                if time.monotonic() > deadline:
                    os.kill(child, signal.SIGKILL)
                time.sleep(0.05)
        if _state(pid) == "Z":
            # Where pid 1 reaps no orphans (a container without an init), the dead
            # postmaster stays a zombie, which PostgreSQL's lock check takes for a
            # live one; an init would have reaped it, and its lock file is stale.
            for lock in (self.data / "postmaster.pid", self.dir / f".s.PGSQL.{self.port}.lock"):
                lock.unlink(missing_ok=True)

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"


def _ppid(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
