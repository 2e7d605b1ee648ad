"""The tour's catalogue (tour/tour.json) as the tests read it, and its claims as a table
of small rules: each claim is a one-key object (``{"text": {...}}``), its key names the
rule, the rule reads a run's events and says what does not hold (None when it holds).

A step's request is what the page sends for it: the catalogue's fields, the code from
the step's file, and the server's default outputs besides the ones the step asks for
(the page's own request: frontend/src/model/state.ts ``toRequest``). Its ``try`` edit is
applied the way the page's "Apply" button applies it: each find/replace on the code
(the text must be there, once), then the request fields it names.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox.protocol import DEFAULT_OUTPUTS

TOUR = Path(__file__).resolve().parents[2] / "tour"
Events = list[dict[str, Any]]


def catalogue() -> dict[str, Any]:
    return json.loads((TOUR / "tour.json").read_text())


def steps() -> list[dict[str, Any]]:
    return list(catalogue()["steps"])


def request_of(step: dict[str, Any]) -> dict[str, Any]:
    """The run request the page sends for ``step`` as loaded."""
    request = {k: v for k, v in step["request"].items() if k != "outputs"}
    request["code"] = (TOUR / step["file"]).read_text()
    request["outputs"] = [*DEFAULT_OUTPUTS, *step["request"].get("outputs", [])]
    return request


def apply_code_edits(code: str, edits: list[dict[str, str]]) -> str:
    for edit in edits:
        found = code.count(edit["find"])
        if found != 1:
            raise ValueError(f"the try edit's text is in the code {found} times: {edit['find']!r}")
        code = code.replace(edit["find"], edit["replace"])
    return code


def tried_request(step: dict[str, Any]) -> dict[str, Any]:
    """The request after the step's ``try`` edit."""
    edit = step["try"]
    request = request_of(step)
    request["code"] = apply_code_edits(request["code"], edit.get("code", []))
    fields = dict(edit.get("request", {}))
    if "outputs" in fields:
        fields["outputs"] = [*DEFAULT_OUTPUTS, *fields["outputs"]]
    request.update(fields)
    return request


# --- the rules --------------------------------------------------------------------------


def _of(events: Events, kind: str, pipeline: str = "main") -> dict[str, Any] | None:
    found = [e for e in events if e["type"] == kind and e.get("pipeline", "main") == pipeline]
    return found[0] if found else None


def _close(got: Any, want: Any, tol: float) -> bool:
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(_close(g, w, tol) for g, w in zip(got, want, strict=True))
        )
    return isinstance(got, int | float) and math.isclose(got, want, rel_tol=tol, abs_tol=tol)


def _data(leaf: dict[str, Any]) -> Any:
    """A value leaf's numbers, nested as its shape says (the event's ``data`` is flat)."""
    flat = [float(v) for v in leaf["data"]]
    shape = leaf["shape"]

    def nest(values: list[float], dims: list[int]) -> Any:
        if not dims:
            return values[0]
        size = len(values) // dims[0]
        return [nest(values[i * size : (i + 1) * size], dims[1:]) for i in range(dims[0])]

    return nest(flat, shape)


def _status(events: Events, want: str) -> str | None:
    got = events[-1].get("status")
    return None if got == want else f"the run ended {got!r}, not {want!r}: {events[-1]}"


def _error(events: Events, want: dict[str, Any]) -> str | None:
    error = _of(events, "error")
    if error is None:
        return f"no error event; the run ended {events[-1].get('status')!r}"
    for key in ("kind", "line", "stage"):
        if key in want and error.get(key) != want[key]:
            return f"the error's {key} is {error.get(key)!r}, not {want[key]!r}: {error['message'][:300]}"
    return None


def _text(events: Events, want: dict[str, Any]) -> str | None:
    output, pipeline = want["output"], want.get("pipeline", "main")
    event = _of(events, output, pipeline)
    if event is None:
        return f"no {output} event in pipeline {pipeline}"
    parts = [
        p["text"]
        for p in events
        if p["type"] == "text_part" and p.get("output") == output and p.get("pipeline") == pipeline
    ]
    text = event["text"] + "".join(parts)
    where = f"the {output} of pipeline {pipeline}"
    if "has" in want and want["has"] not in text:
        return f"{where} has no {want['has']!r}"
    if "lacks" in want and want["lacks"] in text:
        return f"{where} has {want['lacks']!r}"
    if "count" in want:
        n = len(re.findall(want["count"], text))
        if "is" in want and n != want["is"]:
            return f"{where} has {want['count']!r} {n} times, not {want['is']}"
        if "at_least" in want and n < want["at_least"]:
            return f"{where} has {want['count']!r} {n} times, fewer than {want['at_least']}"
    return None


def _stdout(events: Events, want: dict[str, Any]) -> str | None:
    text = "".join(e["text"] for e in events if e["type"] == "stdout")
    if "has" in want:
        n = text.count(want["has"])
        if n == 0 or ("times" in want and n != want["times"]):
            return f"the console has {want['has']!r} {n} times (wanted {want.get('times', 'some')}): {text[:300]!r}"
    if "lacks" in want and want["lacks"] in text:
        return f"the console has {want['lacks']!r}: {text[:300]!r}"
    return None


def _value(events: Events, want: dict[str, Any]) -> str | None:
    event = _of(events, "value")
    if event is None:
        return "no value event"
    leaves = {leaf["path"]: leaf for leaf in event["tree"]}
    if "leaves" in want:
        got = {path: leaf["shape"] for path, leaf in leaves.items()}
        if got != want["leaves"]:
            return f"the value's leaves are {got}, not {want['leaves']}"
    tol = want.get("tol", 1e-5)
    if {"shape", "close_to", "not_close_to"} & want.keys():
        # one leaf: the whole value (path "") unless the claim names one
        leaf = leaves.get(want.get("leaf", ""))
        if leaf is None:
            return f"the value has no leaf {want.get('leaf', '')!r}: {sorted(leaves)}"
        if "shape" in want and leaf["shape"] != want["shape"]:
            return f"the value's shape is {leaf['shape']}, not {want['shape']}"
        if "close_to" in want and not _close(_data(leaf), want["close_to"], tol):
            return f"the value is {event['repr'][:300]}, not {want['close_to']}"
        if "not_close_to" in want and _close(_data(leaf), want["not_close_to"], tol):
            return f"the value is {event['repr'][:300]}, close to {want['not_close_to']}"
    if "same_as" in want:
        other = _of(events, "value", want["same_as"])
        if other is None:
            return f"no value event in pipeline {want['same_as']}"
        theirs = {lf["path"]: lf for lf in other["tree"]}
        for path, mine in leaves.items():
            if path not in theirs or not _close(_data(mine), _data(theirs[path]), tol):
                return f"the value differs from pipeline {want['same_as']}'s at {path!r}"
    return None


def _check(events: Events, want: dict[str, Any]) -> str | None:
    event = _of(events, "checks")
    if event is None:
        return "no checks event"
    results = [r for r in event["results"] if r["name"] == want["name"]]
    if not results:
        return f"no {want['name']} check in {event['results']}"
    got = results[0]
    if got["status"] != want["status"]:
        return f"the {want['name']} check is {got['status']!r}, not {want['status']!r}: {got['message']}"
    if "line" in want and got["line"] != want["line"]:
        return f"the {want['name']} check points at line {got['line']}, not {want['line']}"
    return None


def _recompiles(events: Events, want: dict[str, Any]) -> str | None:
    event = _of(events, "recompiles")
    if event is None:
        return "no recompiles event"
    sites = [
        s for s in event["sites"] if s["line"] == want["line"] and s["function"] == want["function"]
    ]
    if not sites:
        return f"no recompiles site of {want['function']} at line {want['line']}"
    site = sites[0]
    if site["miss_count"] != want["misses"] or site["hits"] != want["hits"]:
        return f"line {want['line']} has {site['miss_count']} compiles and {site['hits']} hits, not {want['misses']} and {want['hits']}"
    return None


def _cost(events: Events, want: dict[str, Any]) -> str | None:
    event = _of(events, "cost")
    if event is None:
        return "no cost event"
    if event["flops"] != want["flops"]:
        return f"the cost is {event['flops']} flops, not {want['flops']}"
    return None


def _timing(events: Events, want: dict[str, Any]) -> str | None:
    event = _of(events, "timing")
    if event is None:
        return "no timing event"
    rows = {r["label"]: r for r in event["rows"]}
    for label in want["labels"]:
        row = rows.get(label)
        if row is None or not row["median_ms"] or row["median_ms"] <= 0:
            return f"the timing has no measured row {label!r}: {event['rows']} {event['notes']}"
    return None


def _remarks(events: Events, want: dict[str, Any]) -> str | None:
    event = _of(events, "remarks")
    if event is None:
        return "no remarks event"
    items = [i for i in event["items"] if i["kind"] == want["kind"]]
    if "line" in want:
        items = [i for i in items if i["line"] == want["line"]]
    if len(items) != want["count"]:
        return f"{len(items)} {want['kind']} remarks (line {want.get('line', 'any')}), not {want['count']}"
    return None


def _export(events: Events, want: dict[str, Any]) -> str | None:
    event = _of(events, "export")
    if event is None:
        return "no export event"
    for key in ("in_avals", "out_avals"):
        if key in want and event[key] != want[key]:
            return f"the export's {key} are {event[key]}, not {want[key]}"
    if want.get("roundtrip_equal"):
        trips = event.get("roundtrip") or []
        if not trips or not all(t.get("equal") for t in trips):
            return f"the export's round trip is not equal: {trips} {event['notes']}"
    return None


RULES: dict[str, Callable[[Events, Any], str | None]] = {
    "status": _status,
    "error": _error,
    "text": _text,
    "stdout": _stdout,
    "value": _value,
    "check": _check,
    "recompiles": _recompiles,
    "cost": _cost,
    "timing": _timing,
    "remarks": _remarks,
    "export": _export,
}


def broken(events: Events, claims: list[dict[str, Any]]) -> list[str]:
    """What of ``claims`` does not hold for ``events``: one line per claim that fails."""
    problems = []
    for claim in claims:
        ((kind, want),) = claim.items()
        why = RULES[kind](events, want)
        if why is not None:
            problems.append(f"{json.dumps(claim)}: {why}")
    return problems
