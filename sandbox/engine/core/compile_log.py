"""What XLA's C++ logs say while one pipeline compiles.

XLA logs some findings about the program it compiles only as C++ log lines on the
process's standard error (file descriptor 2), never through Python: the SPMD
partitioner's "Involuntary full rematerialization" is one (a ``LOG(WARNING)`` in
spmd_partitioner.cc on jax 0.12, a ``LOG(ERROR)`` before). ``captured()`` points fd 2
at a file for the compile, gives the text to the pipeline's ``Results.compile_log``,
and writes it on to the real fd 2 afterwards, so that whoever read the worker's
standard error before still reads it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

#: what one compile's log may hold; past it the rest is not read (it still goes to fd 2)
MAX_COMPILE_LOG_BYTES = 1 << 20


class CompileLog:
    """The text fd 2 received while a compile ran (empty until the compile ends)."""

    def __init__(self) -> None:
        self.text = ""


@contextlib.contextmanager
def captured() -> Iterator[CompileLog]:
    log = CompileLog()
    for stream in (sys.stderr, sys.__stderr__):
        if stream is not None:
            stream.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no standard error to take (closed): nothing XLA logs can be read
        yield log
        return
    try:
        with tempfile.TemporaryFile() as caught:
            os.dup2(caught.fileno(), 2)
            try:
                yield log
            finally:
                os.dup2(saved, 2)
                caught.seek(0)
                data = caught.read()
                log.text = data[:MAX_COMPILE_LOG_BYTES].decode(errors="replace")
                while data:  # on to the real standard error, as it would have gone
                    data = data[os.write(2, data) :]
    finally:
        os.close(saved)
