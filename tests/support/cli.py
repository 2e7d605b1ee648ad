"""``jaxplay`` in the test's own process: the console script is ``backend.cli.main:main``,
which calls this typer app; what a subprocess adds is a new Python's imports (about 2 s
a command on a loaded machine). The CLI tests keep one console-script run of each path
end to end in a process of its own."""

from __future__ import annotations

import subprocess

from typer.testing import CliRunner

from backend.cli.main import app


def in_process(
    *argv: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``jaxplay *argv`` through the console script's typer app in this process (``env``:
    variables set for the command): its exit status, stdout and stderr as a
    subprocess's. An exception the command lets out fails the test (as a traceback and
    exit status 1 would)."""
    result = CliRunner().invoke(app, list(argv), input=stdin, env=env, catch_exceptions=False)
    return subprocess.CompletedProcess(list(argv), result.exit_code, result.stdout, result.stderr)
