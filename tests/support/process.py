"""A child process of the tests (a server, a worker), logging to a file: started,
watched and stopped one way. ``new_session``: its own process group, which ``stop``
kills whole when the process does not end in time."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Self

ROOT = Path(__file__).resolve().parents[2]


class Process:
    def __init__(
        self, argv: list[str], env: dict[str, str], log: Path, *, new_session: bool = True
    ) -> None:
        self.argv, self.env, self.log = argv, env, log
        self.new_session = new_session
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=out,
                start_new_session=self.new_session,
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
                if self.new_session:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                else:
                    self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        return code
