"""A jail's zygote and its template's eager compiler (eager_compiler.py): what the
zygote writes into its jail's cache before each run, and what it passes on after.

The zygote holds its jail's connection to the compiler; no run's process does. It
gives every child it forks the write end of one pipe (``report_fd``), on which a
run's engine writes the descriptions of what its set-up compiled eagerly and missed
(sandbox/engine/core/shared_eager.py); the zygote reads that pipe after each run and
passes what it holds on, unread but for its size (the compiler checks each line:
it is a run's word). Before each run in a new process (a kept one has its own
in-memory caches of what it met), and once before its first warm child, it asks the
compiler for what it learnt since the last time (waiting, at most, for the one
compile the compiler may be in the middle of) and writes each entry into the
jail's compilation cache as the seed's are written (seed.py's ``plant``: new files
only, never through a link), so that JAX there loads them instead of compiling.

Anything that goes wrong (the compiler gone or slow, a full cache) ends the link: the
jail compiles for itself, as it did without one.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket

from sandbox.engine.core.shared_eager import REPORT_BYTES
from sandbox.jail import compile_cache

#: how long a pull may take before the link is given up
PULL_S = 0.5


class EagerLink:
    """The zygote's end: its connection, the report pipe, how far it has pulled."""

    def __init__(self, fd: int) -> None:
        self.sock: socket.socket | None = socket.socket(fileno=fd)
        self.sock.settimeout(PULL_S)
        self.report_fd, self._write_fd = os.pipe()  # read here; written by the runs
        os.set_blocking(self.report_fd, False)
        # a run that writes it full is refused (EAGAIN), never left waiting for a
        # reader that reads only after the run
        os.set_blocking(self._write_fd, False)
        self.next = 0

    @property
    def write_fd(self) -> int:
        """The pipe's end every child gets (sandbox/engine/api.py's ``share_eager``)."""
        return self._write_fd

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def pull(self, path: str = compile_cache.CACHE_DIR) -> int:
        """What the compiler learnt since the last pull, written into the jail's
        cache; how many entries were new here."""
        if self.sock is None:
            return 0
        written = 0
        try:
            self.sock.send(b"P" + json.dumps({"since": self.next}).encode())
            while True:
                data = self.sock.recv(256 << 10)
                if data[:1] == b"D":
                    self.next = int(json.loads(data[1:])["next"])
                    return written
                if data[:1] != b"E":
                    raise OSError("not the compiler's answer")
                head, _, entry = data[1:].partition(b"\n")
                said = json.loads(head)
                written += _plant(path, str(said["name"]), int(said["made"]), entry)
        except (OSError, ValueError, KeyError, TypeError):
            self.close()  # gone, slow or confused: the jail compiles for itself
            return written

    def pass_on(self) -> int:
        """What the runs since the last call reported, passed on to the compiler (as
        one message; what does not fit is dropped). Returns its size."""
        data = b""
        with contextlib.suppress(BlockingIOError, OSError):
            while len(data) < REPORT_BYTES and (chunk := os.read(self.report_fd, 1 << 16)):
                data += chunk
        data = data[:REPORT_BYTES]
        if self.sock is None or not data:
            return 0
        try:
            self.sock.send(b"L" + data)
        except OSError:
            self.close()
            return 0
        return len(data)


def _plant(path: str, name: str, made_ns: int, entry: bytes) -> int:
    """One entry written as a new file with the compiler's time for it (1), or not (0:
    there already, a name JAX does not give, or a full cache)."""
    if not compile_cache.is_entry_name(name) or "/" in name:
        return 0
    try:
        compile_cache.write_entry(path, name, entry, made_ns)
    except (OSError, ValueError, OverflowError):
        return 0
    return 1
