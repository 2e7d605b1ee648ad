"""Free loopback ports, and waiting for a condition with a deadline."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A loopback port nobody listens on now (the OS's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], T], timeout_s: float, what: str, every_s: float = 0.05) -> T:
    """``check()``'s first truthy value; TimeoutError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout_s:g} s")
        time.sleep(every_s)
