"""The ``passes`` output: every pass of XLA that changed the module, in order, read
from XLA's dump of the compile (core/xla_dump.py)."""

from __future__ import annotations

import difflib
import re
from typing import Any

from sandbox.engine.core.output import Output, Results
from sandbox.engine.core.sources import hlo_sources
from sandbox.engine.core.xla_dump import Dump, no_dump_note, too_big
from sandbox.protocol.limits import MAX_PASS_ITEMS, MAX_PASSES_CHARS, MAX_TEXT_CHARS

_PASS_FILE = re.compile(r"^(\d{4})\.([^.]+)\.after_(.+?)(?:\.before_.+)?\.txt$")


def passes_event(dump: Dump, hlo_text: str) -> dict[str, Any]:
    """Every pass that changed the module, in order; first the module before
    optimisation, last the optimised module exactly as the ``hlo`` output shows it."""
    event: dict[str, Any] = {"type": "passes", "items": [], "notes": []}
    files = dump.files()
    if not files:
        event["notes"].append(no_dump_note())
        return event
    if note := too_big(dump):
        event["notes"].append(note)
        return event
    steps: list[tuple[str, str, str]] = [
        ("", "before-optimizations", dump.read(files["before_optimizations.txt"]))
    ]
    for name in sorted(files):
        match = _PASS_FILE.match(name)
        if match:
            steps.append((match.group(2), match.group(3), dump.read(files[name])))
    changed = [steps[0]]
    for step in steps[1:]:
        if step[2] != changed[-1][2]:
            changed.append(step)
    if changed[-1][2] != hlo_text:
        # XLA's last dump and the executable's own text differ (a later pass that
        # dumps nothing, or printing options): the list ends with the latter
        changed.append(("", "as-compiled", hlo_text))
    too_long = max(len(text) for _, _, text in changed)
    if too_long > MAX_TEXT_CHARS:
        event["notes"].append(
            f"the module's text is {too_long:,} characters, over the {MAX_TEXT_CHARS:,} an "
            "item may carry; the pass list is not shown"
        )
        return event
    event["items"], notes = _items_within_budget(changed)
    event["notes"] += notes
    return event


def _items_within_budget(
    changed: list[tuple[str, str, str]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Items with their whole text while all of them fit MAX_PASSES_CHARS; else the
    middle ones carry a unified diff from the item before; passes beyond the budget
    are left out (and counted in a note). First and last always carry text."""
    notes: list[str] = []
    whole = sum(len(text) for _, _, text in changed)
    use_diff = whole > MAX_PASSES_CHARS
    first, last = changed[0], changed[-1]
    budget = MAX_PASSES_CHARS - len(first[2]) - len(last[2])
    items = [_item(first, text=True)]
    left_out = 0
    previous = first[2]
    for step in changed[1:-1]:
        if len(items) >= MAX_PASS_ITEMS - 1:
            left_out += 1
            continue
        item = _item(step, text=not use_diff, previous=previous)
        cost = len(item.get("text") or item.get("diff") or "")
        if cost > budget:
            left_out += 1
            continue
        budget -= cost
        items.append(item)
        previous = step[2]
    last_item = _item(last, text=True)
    items.append(last_item)
    if use_diff:
        notes.append("the module is large: passes after the first carry a diff from the one before")
    if left_out:
        notes.append(
            f"{left_out} changing passes are not shown: the module is too large for the event's "
            "budget (xla_disable_hlo_passes in compiler_options leaves passes out)"
        )
    return items, notes


def _item(step: tuple[str, str, str], *, text: bool, previous: str = "") -> dict[str, Any]:
    pipeline, name, body = step
    item: dict[str, Any] = {"pipeline": pipeline[:1024], "pass": name[:1024]}
    if text:
        item["text"] = body
        item["sources"] = hlo_sources(body)
    else:
        diff = difflib.unified_diff(
            previous.splitlines(True), body.splitlines(True), "before", "after", n=2
        )
        item["diff"] = "".join(diff)
    return item


def passes_events(r: Results) -> dict[str, Any]:
    assert r.dump is not None, "the row asks for a dump"
    return passes_event(r.dump, r.compiled.as_text())


OUTPUT = Output("compiled", "reading XLA's pass dumps", passes_events, dumps=("passes",))
