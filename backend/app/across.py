"""Across versions: one request's events on several JAX versions, compared.

For each output (jaxpr, StableHLO, HLO, value, cost) of each pipeline, the versions
where it changed from the version before, oldest first, each with the unified diff at
that step; and a table of the stage times (trace, lower, compile, execute) and of the
timing rows' medians per version. Timings are measurements, so they are compared in
the table, never diffed. Pure functions over events: the route runs the versions.
"""

from __future__ import annotations

import difflib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

#: the outputs compared as text, in the order they are produced
COMPARED = ("jaxpr", "stablehlo", "hlo", "value", "cost")
#: a diff longer than this many lines is cut (the texts themselves are in each run)
MAX_DIFF_LINES = 400
STAGE_TIMES = ("trace", "lower", "compile", "execute")


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
    for event in events:
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


def changes(runs: list[VersionRun]) -> list[dict[str, Any]]:
    """Per output and pipeline: the steps (version to next version) where it changed."""
    keys = sorted(
        {key for run in runs for key in run.outputs},
        key=lambda k: (COMPARED.index(k[0]), k[1] != "main", k[1]),
    )
    answer = []
    for kind, pipeline in keys:
        steps = []
        for before, after in itertools.pairwise(runs):
            old, new = before.outputs.get((kind, pipeline)), after.outputs.get((kind, pipeline))
            if old != new:
                steps.append(
                    {
                        "from": before.version,
                        "to": after.version,
                        "diff": _diff(old, new, before.version, after.version),
                    }
                )
        answer.append(
            {
                "output": kind,
                "pipeline": pipeline,
                "first_changed": steps[0]["to"] if steps else None,
                "changes": steps,
                "missing": [r.version for r in runs if (kind, pipeline) not in r.outputs],
            }
        )
    return answer


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
