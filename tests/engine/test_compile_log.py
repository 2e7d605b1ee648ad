"""core/compile_log.py: what C++ code writes to file descriptor 2 during a compile is
kept for the outputs and still reaches the process's standard error."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_fd_2_is_kept_and_passed_on() -> None:
    script = textwrap.dedent(
        """
        import os
        from sandbox.engine.core import compile_log
        with compile_log.captured() as log:
            os.write(2, b"W spmd_partitioner.cc] [SPMD] Involuntary full rematerialization.\\n")
        assert log.text == "W spmd_partitioner.cc] [SPMD] Involuntary full rematerialization.\\n"
        os.write(2, b"after\\n")
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "ok\n"
    assert done.stderr == (
        "W spmd_partitioner.cc] [SPMD] Involuntary full rematerialization.\nafter\n"
    )
