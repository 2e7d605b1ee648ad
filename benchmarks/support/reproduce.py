"""The line every benchmark prints first: the command that reproduces it, and what it
ran on (the commit, the machine's CPUs and load), so a figure quoted in docs/ can be
run again as it was measured."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# set once the line is printed: the benchmark's own child processes (many re-run their
# script in another mode) inherit it and print nothing that their parent parses
_PRINTED = "JAXPLAY_BENCHMARK_ANNOUNCED"


def command() -> str:
    """The command line that ran this benchmark, from the repository's root."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = str(script.relative_to(ROOT))
    except ValueError:
        shown = str(script)
    return shlex.join([".venv/bin/python", shown, *sys.argv[1:]])


def announce() -> str:
    """Print (once per benchmark, not in its children) and return the command."""
    line = command()
    if os.environ.get(_PRINTED):
        return line
    os.environ[_PRINTED] = "1"
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"# reproduce: {line}", flush=True)
    print(f"# at {commit or 'unknown commit'}, {os.cpu_count()} CPUs, load {load}", flush=True)
    return line
