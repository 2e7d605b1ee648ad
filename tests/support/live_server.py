"""A real ``jaxplay serve`` in a child process, on a free loopback port: the one
server starter of the suite (the server, browser and queue tests, the benchmarks)."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Protocol, Self

import httpx

from tests.support.ports import free_port, wait_for
from tests.support.process import Process

#: the server as a module run from the checkout: ``--pool tests.server.fakes:...`` loads
MODULE = [sys.executable, "-m", "backend.cli.serve"]


def serve_command() -> list[str]:
    """``jaxplay serve`` as a user starts it (the module when the script is not installed)."""
    script = Path(sys.executable).with_name("jaxplay")
    return [str(script), "serve"] if script.exists() else MODULE


class LiveServer(Process):
    """``database``: a SQLite file (a Path) or a database URL. ``args``: more flags;
    ``env``: JAXPLAY_* settings over the test defaults; ``as_user``: started as the
    ``jaxplay serve`` script (else as the module, which can load the tests' fake
    pools). ``launch()`` starts it, ``wait_ready()`` waits for /healthz, ``start()``
    does both."""

    def __init__(
        self,
        database: Path | str,
        *args: str,
        env: dict[str, str] | None = None,
        port: int | None = None,
        log: Path | None = None,
        new_session: bool = False,
        as_user: bool = False,
    ) -> None:
        self.database = database
        self.database_url = f"sqlite:///{database}" if isinstance(database, Path) else str(database)
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
        if log is None:
            assert isinstance(database, Path), "a server on a database URL names its log"
            log = database.with_suffix(f".{self.port}.log")
        self.command = serve_command() if as_user else MODULE
        # its own process group or not (the queue tests kill a server's whole tree)
        super().__init__([], self.env, log, new_session=new_session)

    def launch(self) -> Self:
        argv = [
            *self.command,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--database-url",
            self.database_url,
            *self.args,
        ]
        self.argv = argv
        return super().start()

    def wait_ready(self, timeout_s: float = 60.0) -> Self:
        def healthy() -> bool:
            if not self.alive():
                code = None if self.proc is None else self.proc.returncode
                raise RuntimeError(f"the server exited {code}: {self.tail()}")
            try:
                return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            wait_for(healthy, timeout_s, f"the server did not start: {self.tail()}", every_s=0.1)
        except TimeoutError:
            self.stop()
            raise
        return self

    def start(self, timeout_s: float = 60.0) -> Self:
        return self.launch().wait_ready(timeout_s)

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


class HasUrl(Protocol):
    url: str


def pristine_confirmed(server: HasUrl) -> float:
    """Pristine runs that confirmed an entry so far (the server's /metrics)."""
    text = httpx.get(server.url + "/metrics", timeout=10).text
    found = re.search(r'jaxplay_pristine_runs_total\{outcome="confirmed"\} ([\d.]+)', text)
    return float(found.group(1)) if found else 0.0


def pristine_figures(server: HasUrl) -> str:
    """The server's pristine figures (runs by outcome, asks by result, its line): what
    a failed wait for a confirmation says about why."""
    text = httpx.get(server.url + "/metrics", timeout=10).text
    wanted = ("jaxplay_pristine", "jaxplay_queue_length", "jaxplay_pool{")
    return "\n".join(line for line in text.splitlines() if line.startswith(wanted))


def wait_for_pristine_idle(server: HasUrl, timeout_s: float = 180) -> None:
    """Until no key waits for a pristine run and none runs: an earlier request's
    confirmation, which comes in its own time, cannot then be taken for the next's."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = httpx.get(server.url + "/metrics", timeout=10).text
        line = re.findall(r'jaxplay_pristine_line\{state="(?:waiting|running)"\} ([\d.]+)', text)
        if len(line) == 2 and not any(float(n) for n in line):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the pristine line never emptied:\n{pristine_figures(server)}")
        time.sleep(0.2)


def wait_for_pristine_confirmed(server: HasUrl, at_least: float, timeout_s: float = 180) -> None:
    """Until ``at_least`` pristine runs confirmed an entry: a request that asks for one
    runs at once, and the next request for it is served once it agreed."""
    deadline = time.monotonic() + timeout_s  # a fresh jail, on a loaded machine
    while pristine_confirmed(server) < at_least:
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no pristine run confirmed the answer:\n{pristine_figures(server)}"
            )
        time.sleep(0.2)


def wait_for_confirmed_answer(server: HasUrl, snippet: str, timeout_s: float = 180) -> None:
    """Until the page of ``/s/{snippet}`` carries a confirmed answer (its
    ``jaxplay-initial``): a pristine run confirmed this snippet's own request, not
    only some earlier test's, whose lagging pristine run moves the counter too."""
    deadline = time.monotonic() + timeout_s  # a fresh jail, on a loaded machine
    while 'id="jaxplay-initial"' not in httpx.get(f"{server.url}/s/{snippet}", timeout=10).text:
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no pristine run confirmed snippet {snippet}:\n{pristine_figures(server)}"
            )
        time.sleep(0.2)
