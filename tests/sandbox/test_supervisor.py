"""The supervisor's own rules, with tiny workers that are not JAX: it keeps only
known events, caps output and events, and enforces the wall clock from outside."""

from __future__ import annotations

import asyncio
import sys
import time

from sandbox.protocol import RunRequest
from sandbox.supervisor import OutputLimits, SupervisedRun


def _events(worker: str, timeout_s: float = 10, **limits: int) -> tuple[list[dict], float]:
    argv = [sys.executable, "-c", "import sys, os, json, time\nsys.stdin.read()\n" + worker]
    run = SupervisedRun(
        argv, RunRequest(code="", timeout_s=timeout_s), "r", limits=OutputLimits(**limits)
    )

    async def go() -> list[dict]:
        return [e async for e in run.events()]

    started = time.monotonic()
    return asyncio.run(go()), time.monotonic() - started


def test_only_known_events_pass() -> None:
    events, _ = _events(
        "print('garbage'); print('[1]'); print(json.dumps({'type': 'evil'}));"
        "print(json.dumps({'type': 'stage', 'stage': 'exec', 'ms': 1}));"
        "print(json.dumps({'type': 'done', 'status': 'ok', 'ms': 1, 'reason': ''}))"
    )
    assert [e["type"] for e in events] == ["stage", "done"]
    assert events[-1]["status"] == "ok"


def test_stderr_is_relayed_and_capped() -> None:
    events, elapsed = _events("while True:\n    os.write(2, b'x' * 4096)", output_bytes=64 * 1024)
    assert events[-1]["status"] == "killed" and events[-1]["reason"] == "output 64 KiB"
    assert sum(len(e["text"]) for e in events if e["type"] == "stderr") <= 64 * 1024
    assert elapsed < 5


def test_event_bytes_cap() -> None:
    events, _ = _events(
        "while True:\n    print(json.dumps({'type': 'stage', 'stage': 'x' * 1000, 'ms': 1}), flush=True)",
        event_bytes=100_000,
    )
    assert events[-1]["status"] == "killed" and "results over" in events[-1]["reason"]


def test_wall_clock() -> None:
    events, elapsed = _events(
        "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)", timeout_s=1
    )
    assert events[-1] == {**events[-1], "status": "timeout", "reason": "wall clock 1 s"}
    assert elapsed < 3


def test_exit_without_done() -> None:
    events, _ = _events("sys.exit(3)")
    assert events[-1]["status"] == "error" and "status 3" in events[-1]["reason"]
