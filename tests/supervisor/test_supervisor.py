"""The supervisor's own rules, with tiny workers that are not JAX: it keeps only
known events, caps output and events, and enforces the wall clock from outside."""

from __future__ import annotations

import asyncio
import sys
import time

from sandbox.protocol import TAMPERED_REASON, RunRequest
from sandbox.supervisor import OutputLimits, SupervisedRun


def _events(worker: str, timeout_s: float = 10, **limits: int) -> tuple[list[dict], float]:
    # T: the run's token from the worker message, which the engine tags its lines with
    prelude = "import sys, os, json, time\nT = json.loads(sys.stdin.read())['token'] + ' '\n"
    argv = [sys.executable, "-c", prelude + worker]
    run = SupervisedRun(
        argv, RunRequest(code="", timeout_s=timeout_s), "r", limits=OutputLimits(**limits)
    )

    async def go() -> list[dict]:
        return [e async for e in run.events()]

    started = time.monotonic()
    return asyncio.run(go()), time.monotonic() - started


def test_only_known_events_pass_and_a_refused_line_makes_the_run_tampered() -> None:
    events, _ = _events(
        "print('garbage'); print(T + '[1]'); print(T + json.dumps({'type': 'evil'}));"
        "print(json.dumps({'type': 'stage', 'stage': 'exec', 'ms': 1}));"  # no token
        "print(T + json.dumps({'type': 'stage', 'stage': 'exec', 'ms': 2}));"
        "print(T + json.dumps({'type': 'done', 'status': 'ok', 'ms': 1, 'reason': ''}))"
    )
    assert [e["type"] for e in events] == ["stage", "done"]
    assert events[0]["ms"] == 2  # the tagged one, though the forged one came first
    done = events[-1]
    assert done["status"] == "tampered" and done["dropped"] == 4, done
    assert done["reason"].startswith(TAMPERED_REASON), done
    assert "no run token" in done["reason"], done


def test_a_run_whose_lines_all_carry_its_token_ends_ok() -> None:
    events, _ = _events(
        "print(T + json.dumps({'type': 'stage', 'stage': 'exec', 'ms': 1}));"
        "print(T + json.dumps({'type': 'done', 'status': 'ok', 'ms': 1, 'reason': ''}))"
    )
    assert [e["type"] for e in events] == ["stage", "done"]
    assert events[-1]["status"] == "ok" and "dropped" not in events[-1], events[-1]


def test_a_refused_line_in_a_run_that_failed_still_says_tampered() -> None:
    events, _ = _events("print('forged'); sys.exit(3)")
    done = events[-1]
    assert done["status"] == "tampered" and done["dropped"] == 1, done
    assert "status 3" in done["reason"], done


def test_stderr_is_relayed_and_capped() -> None:
    # killed by the output cap (its reason), not by its 10 s wall clock
    events, _ = _events("while True:\n    os.write(2, b'x' * 4096)", output_bytes=64 * 1024)
    assert events[-1]["status"] == "killed" and events[-1]["reason"] == "output 64 KiB"
    assert sum(len(e["text"]) for e in events if e["type"] == "stderr") <= 64 * 1024


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
    assert events[-1]["status"] == "timeout" and events[-1]["timeout_stage"] == "exec"
    assert events[-1]["reason"].startswith("wall clock 1 s, reached in the exec stage")
    # killed from outside, SIGTERM ignored: long before its 60 s sleep would end
    assert elapsed < 30


def test_exit_without_done() -> None:
    events, _ = _events("sys.exit(3)")
    assert events[-1]["status"] == "error" and "status 3" in events[-1]["reason"]


def test_a_timeout_names_the_stage_after_the_last_one_reported() -> None:
    events, _ = _events(
        "print(T + json.dumps({'type': 'stage', 'stage': 'exec', 'ms': 1}), flush=True)\n"
        "print(T + json.dumps({'type': 'stage', 'stage': 'args', 'ms': 2}), flush=True)\n"
        "time.sleep(0.4)\n"  # a stage is no longer than the run so far
        "print(T + json.dumps({'type': 'stage', 'stage': 'trace', 'ms': 250}), flush=True)\n"
        "time.sleep(60)",
        timeout_s=2,
    )
    done = events[-1]
    # the default outputs: after trace comes lower (the StableHLO), which ran out
    assert done["status"] == "timeout" and done["timeout_stage"] == "lower", done
    assert done["reason"] == (
        "wall clock 2 s, reached in the lower stage (stages done: exec 0.0 s, args 0.0 s, "
        "trace 0.2 s); a longer timeout_s may let it finish"
    )


def _gate_events(lines: list[dict]) -> tuple[list[dict], dict]:
    worker = "".join(f"print(T + json.dumps({line!r}), flush=True)\n" for line in lines)
    events, _ = _events(
        worker + "print(T + json.dumps({'type': 'done', 'status': 'ok', 'ms': 1, 'reason': ''}))"
    )
    return events[:-1], events[-1]


def test_text_parts_pass_only_in_order_after_the_event_that_announced_them() -> None:
    head = {"type": "jaxpr", "text": "a\n… (2 more characters follow in 2 text_part events)\n",
            "sources": [], "parts": 2, "shown_chars": 2, "full_chars": 4}  # fmt: skip
    part = {"type": "text_part", "output": "jaxpr", "text": "b\n", "sources": []}
    events, done = _gate_events([head, {**part, "part": 1}, {**part, "part": 2}])
    assert [e.get("part") for e in events] == [None, 1, 2] and done["status"] == "ok"
    # unannounced, out of order, one too many, another output's: refused, run tampered
    for lines in (
        [{**part, "part": 1}],
        [head, {**part, "part": 2}],
        [head, {**part, "part": 1}, {**part, "part": 1}],
        [head, {**part, "part": 1}, {**part, "part": 2}, {**part, "part": 3}],
        [head, {**part, "part": 1, "output": "hlo"}],
    ):
        events, done = _gate_events(lines)
        assert done["status"] == "tampered" and done["dropped"] == 1, (lines, done)
