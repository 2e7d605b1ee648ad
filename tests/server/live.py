"""A real ``jaxplay serve`` in a child process, on a free loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    def __init__(
        self, database: Path, *args: str, env: dict[str, str] | None = None, port: int | None = None
    ) -> None:
        self.database = database
        self.args = args
        self.env = {
            **os.environ,
            "JAXPLAY_LOG_FORMAT": "text",
            "JAXPLAY_LOG_LEVEL": "warning",
            "JAXPLAY_METRICS_PUBLIC": "true",  # off by default; tests and benchmarks read it
            **(env or {}),
        }
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = database.with_suffix(f".{self.port}.log")

    def start(self, timeout_s: float = 60.0) -> LiveServer:
        argv = [
            sys.executable,
            "-m",
            "backend.serve_cli",
            "--port",
            str(self.port),
            "--database-url",
            f"sqlite:///{self.database}",
            *self.args,
        ]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the server exited {self.proc.returncode}: {self.log.read_text()[-2000:]}"
                )
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("the server did not start")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def descendants(self) -> dict[int, tuple[int, str]]:
        """Every process under the server: pid -> (depth, command line)."""
        children: dict[int, list[tuple[int, str]]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append((int(entry.name), cmdline))
        found: dict[int, tuple[int, str]] = {}
        todo = [(self.pid, 0)]
        while todo:
            parent, depth = todo.pop()
            for pid, cmdline in children.get(parent, []):
                found[pid] = (depth + 1, cmdline)
                todo.append((pid, depth + 1))
        return found

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        return code
