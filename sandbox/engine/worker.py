"""The worker process: its entry point, and what a zygote calls in it.

``main`` is ``python -m sandbox.engine``: it reads one message on stdin and writes
events as JSON lines on what was its stdout. A warm zygote instead imports this
module, calls ``prepare()`` once, forks, and in each child calls ``warm_backend``
and ``describe`` (a warm child) and ``run_message`` (every run). Each lives in the
module of its concern: warmup.py (warming) and run.py (a run).
"""

from __future__ import annotations

import json
import os
import sys

from sandbox.engine.core.run import run_message
from sandbox.engine.core.warmup import WARM_REQUEST, describe, prepare, warm_backend

__all__ = ["WARM_REQUEST", "describe", "main", "prepare", "run_message", "warm_backend"]

MAX_MESSAGE_BYTES = 1024 * 1024


def main() -> int:
    # Events go to a private copy of stdout; fd 1 then points at stderr, so output
    # written below Python (C libraries, os.write(1, ...)) cannot corrupt the stream.
    event_fd = os.dup(1)
    os.dup2(2, 1)
    raw = sys.stdin.buffer.read(MAX_MESSAGE_BYTES + 1)
    if len(raw) > MAX_MESSAGE_BYTES:
        print("jaxplay worker: message too large", file=sys.stderr)
        return 2
    message = json.loads(raw)
    prepare()
    return run_message(message, event_fd)
