"""The "require" gates fail when what they require is missing (tests/gates.py).

Each case runs pytest in a subprocess with one requirement made missing (an
environment variable pointing at a binary that does not exist, or a PATH without
it) and the gate demanded: the run must exit non-zero with the gate's message, and
run no test. Without the demand, the same run skips, saying why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the gates' own variables, cleared so that the parent's (CI's) do not leak in
GATES = ("CI", "JAXPLAY_JAIL_TESTS", "JAXPLAY_BROWSER_TESTS", "JAXPLAY_SCALE_TESTS")
#: a collection-only pytest: no test runs, no browser or jail starts
COLLECT = ("--collect-only", "-q", "-p", "no:cacheprovider")


def pytest_run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in GATES}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


@pytest.mark.parametrize(
    "demand", [{"JAXPLAY_JAIL_TESTS": "require"}, {"CI": "true"}], ids=["require", "CI"]
)
@pytest.mark.slow
def test_the_jail_gate_fails_without_bubblewrap(demand: dict[str, str]) -> None:
    missing = {"JAXPLAY_BWRAP": "/nonexistent/bwrap"}
    # even a test that needs no jail: the whole session fails at its start
    r = pytest_run(*COLLECT, "tests/test_gates.py", **missing, **demand)
    out = r.stdout + r.stderr
    assert r.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "JAXPLAY_JAIL_TESTS=require (or CI=true), but bubblewrap" in out, out[-3000:]
    assert "/nonexistent/bwrap" in out


@pytest.mark.slow
def test_without_the_demand_a_missing_jail_skips_saying_why() -> None:
    r = pytest_run(
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        "tests/jail/test_jail.py::test_a_fresh_jailed_run",
        JAXPLAY_BWRAP="/nonexistent/bwrap",
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "1 skipped" in out and "/nonexistent/bwrap" in out, out[-3000:]


@pytest.mark.slow
def test_the_browser_gate_fails_without_chromium() -> None:
    r = pytest_run(
        *COLLECT,
        "tests/browser/test_page.py",
        JAXPLAY_BROWSER_TESTS="require",
        JAXPLAY_CHROMIUM="/nonexistent/chromium",
    )
    out = r.stdout + r.stderr
    assert r.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert (
        "JAXPLAY_BROWSER_TESTS=require (or CI=true), but /nonexistent/chromium is missing" in out
    ), out[-3000:]
    assert "xfail" not in out


@pytest.mark.slow
def test_the_browser_gate_fails_without_the_built_page(tmp_path: Path) -> None:
    r = pytest_run(
        *COLLECT,
        "tests/browser/test_page.py",
        JAXPLAY_BROWSER_TESTS="require",
        JAXPLAY_TEST_FRONTEND_DIST=str(tmp_path),  # no index.html there
    )
    out = r.stdout + r.stderr
    assert r.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    want = "JAXPLAY_BROWSER_TESTS=require (or CI=true), but frontend/dist is not built"
    assert want in out, out[-3000:]


@pytest.mark.slow
def test_the_scale_gate_fails_without_redis(tmp_path: Path) -> None:
    # a PATH with no redis-server on it (the interpreter is named by its full path)
    r = pytest_run(
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/queue/test_queue.py::test_runs_flow_to_two_workers",
        JAXPLAY_SCALE_TESTS="require",
        PATH=str(tmp_path),
    )
    out = r.stdout + r.stderr
    assert r.returncode == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert "JAXPLAY_SCALE_TESTS=require (or CI=true), but redis-server is not installed" in out, (
        out[-3000:]
    )
