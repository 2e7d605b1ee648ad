"""Across versions: one request's events on several JAX versions, compared.

For each output (jaxpr, StableHLO, HLO, value, cost) of each pipeline, the versions
where it changed from the version before, oldest first, each with the unified diff at
that step; and a table of the stage times (trace, lower, compile, execute) and of the
timing rows' medians per version. Timings are measurements, so they are compared in
the table, never diffed. Pure functions over events: the route runs the versions.

The diffs are made off the server's event loop, under a budget (``diff_off_loop``):
in a child process of this file run as a script (it imports only the standard
library), niced, with a memory limit and a time limit, killed when the client
leaves; a step whose two texts are over ``max_chars`` together is not diffed at all
(difflib is quadratic at worst: a crafted pair could take minutes). What was not
diffed says so, in the step's ``diff``; where it changed is still said.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import itertools
import json
import os
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any

from sandbox.protocol.text_parts import join_parts

#: the outputs compared as text, in the order they are produced
COMPARED = ("jaxpr", "stablehlo", "hlo", "value", "cost")
#: a diff longer than this many lines is cut (the texts themselves are in each run)
MAX_DIFF_LINES = 400
STAGE_TIMES = ("trace", "lower", "compile", "execute")
#: the diff process's address space (it holds the texts, twice, and difflib's tables)
DIFF_MEMORY_BYTES = 1024 * 2**20


@dataclass
class VersionRun:
    """What one version's run produced, reduced to what is compared."""

    version: str
    status: str = "error"
    reason: str = ""
    jax_version: str | None = None
    #: (output, pipeline) -> its comparable text
    outputs: dict[tuple[str, str], str] = field(default_factory=dict)
    #: pipeline -> "Kind at stage: message" of the error that stopped it
    errors: dict[str, str] = field(default_factory=dict)
    stage_ms: dict[str, float] = field(default_factory=dict)
    #: timing label -> median ms per call
    timing_ms: dict[str, float] = field(default_factory=dict)


def comparable(kind: str, event: dict[str, Any]) -> str:
    """The text of an output event that two versions are compared on."""
    if kind in ("jaxpr", "stablehlo", "hlo"):
        return str(event.get("text", ""))
    if kind == "value":
        leaves = [
            json.dumps({k: v for k, v in leaf.items() if k != "data"}, sort_keys=True)
            for leaf in event.get("tree") or []
            if isinstance(leaf, dict)
        ]
        return "\n".join([str(event.get("repr", "")), *leaves])
    return json.dumps(
        {k: v for k, v in event.items() if k not in ("type", "pipeline")}, indent=1, sort_keys=True
    )


def summarize(version: str, events: list[dict[str, Any]]) -> VersionRun:
    run = VersionRun(version)
    for event in join_parts(events):  # a long text is compared whole, not its first part
        kind, pipeline = event.get("type"), str(event.get("pipeline", "main"))
        if kind == "accepted":
            worker = event.get("worker") or {}
            run.jax_version = worker.get("jax_version") if isinstance(worker, dict) else None
        elif kind in COMPARED:
            run.outputs[(kind, pipeline)] = comparable(kind, event)
        elif kind == "stage" and event.get("stage") in STAGE_TIMES:
            name = str(event["stage"])
            run.stage_ms[name] = run.stage_ms.get(name, 0.0) + float(event.get("ms") or 0.0)
        elif kind == "timing":
            for row in event.get("rows") or []:
                if isinstance(row, dict) and isinstance(row.get("median_ms"), int | float):
                    run.timing_ms[str(row.get("label"))] = float(row["median_ms"])
        elif kind == "error":
            run.errors[pipeline] = (
                f"{event.get('kind')} at {event.get('stage')}: {str(event.get('message'))[:300]}"
            )
        elif kind == "done":
            run.status, run.reason = str(event.get("status")), str(event.get("reason") or "")
    return run


def _diff(old: str | None, new: str | None, old_name: str, new_name: str) -> str:
    lines = list(
        difflib.unified_diff(
            (old or "").splitlines(),
            (new or "").splitlines(),
            old_name if old is not None else f"{old_name} (not produced)",
            new_name if new is not None else f"{new_name} (not produced)",
            lineterm="",
            n=2,
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"… ({len(lines) - MAX_DIFF_LINES} more lines)"]
    return "\n".join(lines)


def too_big(size: int, max_chars: int) -> str:
    return (
        f"(not diffed: {size} characters of text, over the {max_chars} the server diffs per "
        "step; each version's run has its full text)"
    )


def out_of_time(seconds: float) -> str:
    return (
        f"(not diffed: this request's diffs ran out of the server's {seconds:g} s for them; "
        "each version's run has its full text)"
    )


def cut_short() -> str:
    return (
        f"(not diffed: the diff process stopped before it, over its "
        f"{DIFF_MEMORY_BYTES // 2**20} MiB of memory; each version's run has its full text)"
    )


def _keys(runs: list[VersionRun]) -> list[tuple[str, str]]:
    return sorted(
        {key for run in runs for key in run.outputs},
        key=lambda k: (COMPARED.index(k[0]), k[1] != "main", k[1]),
    )


def change(
    runs: list[VersionRun], kind: str, pipeline: str, max_chars: int, notice: str | None = None
) -> dict[str, Any]:
    """One output's steps (version to next version) where it changed: each with its
    diff, or ``notice`` in its place where given, or a note where the texts are over
    ``max_chars`` together."""
    steps = []
    for before, after in itertools.pairwise(runs):
        old, new = before.outputs.get((kind, pipeline)), after.outputs.get((kind, pipeline))
        if old != new:
            size = len(old or "") + len(new or "")
            if notice is not None:
                diff = notice
            elif size > max_chars:
                diff = too_big(size, max_chars)
            else:
                diff = _diff(old, new, before.version, after.version)
            steps.append({"from": before.version, "to": after.version, "diff": diff})
    return {
        "output": kind,
        "pipeline": pipeline,
        "first_changed": steps[0]["to"] if steps else None,
        "changes": steps,
        "missing": [r.version for r in runs if (kind, pipeline) not in r.outputs],
    }


def changes(
    runs: list[VersionRun], max_chars: int = 2**62, notice: str | None = None
) -> list[dict[str, Any]]:
    """Per output and pipeline: the steps (version to next version) where it changed."""
    return [change(runs, kind, pipeline, max_chars, notice) for kind, pipeline in _keys(runs)]


# --- the diffs, off the event loop ------------------------------------------------------------


def diff_command() -> list[str]:
    """The diff process: this file as a script (standard library only: it starts in
    tens of milliseconds, not the server's second)."""
    return [sys.executable, "-I", os.path.abspath(__file__), str(DIFF_MEMORY_BYTES)]


def _job(runs: list[VersionRun], max_chars: int) -> tuple[bytes, set[tuple[str, str]]]:
    """What the diff process reads: the texts of the outputs it has a step to diff,
    and those outputs (the others are unchanged or too big: no diff to make)."""
    wanted: dict[tuple[str, str], None] = {}
    for kind, pipeline in _keys(runs):
        for before, after in itertools.pairwise(runs):
            old, new = before.outputs.get((kind, pipeline)), after.outputs.get((kind, pipeline))
            if old != new and len(old or "") + len(new or "") <= max_chars:
                wanted[(kind, pipeline)] = None
    job = {
        "max_chars": max_chars,
        "runs": [
            {
                "version": run.version,
                "outputs": [[k, p, t] for (k, p), t in run.outputs.items() if (k, p) in wanted],
            }
            for run in runs
        ],
    }
    return json.dumps(job).encode(), set(wanted)


#: diff processes at once, over every request; a request past them waits its turn
#: (within its time), so N clients never make N processes
MAX_DIFF_PROCESSES = 2
_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


def _turn() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    if loop not in _turns:
        _turns[loop] = asyncio.Semaphore(MAX_DIFF_PROCESSES)
    return _turns[loop]


async def _first(aw: Any, gone: asyncio.Event | None, timeout: float) -> asyncio.Task[Any]:
    """Run ``aw`` until it ends, ``gone`` is set or ``timeout`` passes; its task (done,
    or cancelled when it did not end)."""
    task = asyncio.ensure_future(aw)
    leaving = asyncio.ensure_future(gone.wait()) if gone is not None else None
    try:
        waits = {task} if leaving is None else {task, leaving}
        await asyncio.wait(waits, timeout=max(0.0, timeout), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, leaving):
            if t is not None and not t.done():
                t.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return task


async def diff_off_loop(
    runs: list[VersionRun], *, max_chars: int, time_s: float, gone: asyncio.Event | None = None
) -> list[dict[str, Any]] | None:
    """``changes(runs)`` made in the diff process, within ``time_s`` (its wait for a
    turn included); outputs it has not diffed by then say so. None when ``gone`` is
    set first (the client left: the process is killed)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + time_s
    answered: dict[tuple[str, str], dict[str, Any]] = {}
    job, wanted = await asyncio.to_thread(_job, runs, max_chars)
    if wanted:
        turn = _turn()
        waited = await _first(turn.acquire(), gone, deadline - loop.time())
        if not waited.cancelled():
            try:
                await _talk(job, answered, gone, deadline - loop.time())
            finally:
                turn.release()
    if gone is not None and gone.is_set():
        return None
    late = out_of_time(time_s) if loop.time() >= deadline else cut_short()
    return [
        answered.get((kind, pipeline))
        # nothing to diff (only notes: too big), or not diffed in time
        or change(runs, kind, pipeline, max_chars, late if (kind, pipeline) in wanted else None)
        for kind, pipeline in _keys(runs)
    ]


async def _talk(
    job: bytes,
    answered: dict[tuple[str, str], dict[str, Any]],
    gone: asyncio.Event | None,
    timeout: float,
) -> None:
    """One diff process: ``job`` in, its answers into ``answered`` as they come, until
    it ends, ``gone`` is set or ``timeout`` passes (then it is killed)."""
    proc = await asyncio.create_subprocess_exec(
        *diff_command(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=2**26,
    )

    async def talk() -> None:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(job)
        with contextlib.suppress(ConnectionError):
            await proc.stdin.drain()
        proc.stdin.close()
        while line := await proc.stdout.readline():
            one = json.loads(line)
            answered[(one["output"], one["pipeline"])] = one

    try:
        talking = await _first(talk(), gone, timeout)
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()
    if not talking.cancelled() and (error := talking.exception()) is not None:
        raise error


def _diff_process(memory_bytes: int) -> None:
    """The diff process: read a job on stdin, write one output's changes a line."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    os.nice(10)  # the server's own loop (its /healthz, its relays) comes first
    job = json.loads(sys.stdin.buffer.read())
    runs = []
    for given in job["runs"]:
        run = VersionRun(given["version"])
        run.outputs = {(k, p): t for k, p, t in given["outputs"]}
        runs.append(run)
    for kind, pipeline in _keys(runs):
        sys.stdout.write(json.dumps(change(runs, kind, pipeline, job["max_chars"])) + "\n")
        sys.stdout.flush()


def times(runs: list[VersionRun]) -> list[dict[str, Any]]:
    """One row per version: its stage times and its timing rows' medians (ms)."""
    return [
        {
            "version": run.version,
            **{f"{stage}_ms": run.stage_ms.get(stage) for stage in STAGE_TIMES},
            "median_ms": dict(run.timing_ms),
        }
        for run in runs
    ]


if __name__ == "__main__":
    _diff_process(int(sys.argv[1]))
