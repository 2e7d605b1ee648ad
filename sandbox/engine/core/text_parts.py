"""An IR text as events: one event when it fits, else its event and ``text_part``s.

A big program's StableHLO (4.7 M characters for a 1,000-layer MLP) is more than a
page should take in one message (TEXT_PART_CHARS). Such a text is
split at line ends into parts of at most TEXT_PART_CHARS characters and MAX_SOURCES
lines, each with the source map of the lines that start in it, so that the whole
text arrives and every line of it is mapped. The first part is the output's own
event (``parts``, ``shown_chars``, ``full_chars`` say what follows; its text ends
with a line saying so, which a client that does not join parts shows); the others
are ``text_part`` events. Only a text over MAX_FULL_TEXT_CHARS (or MAX_TEXT_PARTS
parts) is cut, and its last part says so.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Callable
from typing import Any

from sandbox.protocol.limits import (
    MAX_FULL_TEXT_CHARS,
    MAX_SOURCES,
    MAX_TEXT_PARTS,
    TEXT_PART_CHARS,
)

#: room in the first part for the line that says how much follows
_NOTE_ROOM = 256


def pieces(text: str, budget: int, max_lines: int) -> list[tuple[int, int]]:
    """``(start, end)`` ranges that cover ``text`` in order, each at most ``budget``
    characters and ``max_lines`` newlines, cut after a newline wherever one fits (a
    single line longer than ``budget`` is cut inside)."""
    out: list[tuple[int, int]] = []
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + budget)
        if end < n:
            newline = text.rfind("\n", start, end)
            if newline >= start:
                end = newline + 1
        if text.count("\n", start, end) > max_lines:
            end = start
            for _ in range(max_lines):
                end = text.index("\n", end) + 1
        out.append((start, end))
        start = end
    return out


def ir_events(kind: str, text: str, sources: list[dict[str, int]]) -> list[dict[str, Any]]:
    """The events that carry ``text`` and its ``sources`` (``out_line`` 1-based over
    the whole text): one, or the output's event and its ``text_part`` events."""
    if len(text) <= TEXT_PART_CHARS and len(sources) <= MAX_SOURCES:
        return [{"type": kind, "text": text, "sources": sources}]
    cut_note = ""
    if len(text) > MAX_FULL_TEXT_CHARS:
        cut = text.rfind("\n", 0, MAX_FULL_TEXT_CHARS - _NOTE_ROOM) + 1
        cut_note = (
            f"… ({len(text) - cut} more characters not shown: over the "
            f"{MAX_FULL_TEXT_CHARS:,} characters a text may have)\n"
        )
        text = text[:cut]
    # at most MAX_SOURCES lines a part: one fewer newline
    ranges = pieces(text, TEXT_PART_CHARS - _NOTE_ROOM, MAX_SOURCES - 1)
    if len(ranges) > MAX_TEXT_PARTS:
        cut = ranges[MAX_TEXT_PARTS - 1][1]
        cut_note = (
            f"… ({len(text) - cut} more characters not shown: over the "
            f"{MAX_TEXT_PARTS} parts a text may come in)\n"
        )
        ranges = ranges[:MAX_TEXT_PARTS]
    ordered = sorted(sources, key=lambda s: s["out_line"])
    lines_at = [s["out_line"] for s in ordered]
    events: list[dict[str, Any]] = []
    newlines = 0  # newlines before the current part's start
    for index, (start, end) in enumerate(ranges):
        inside = text.count("\n", start, end)
        # the lines that start in this part: its first one only if the part starts a line
        first = newlines + 1 if start == 0 or text[start - 1] == "\n" else newlines + 2
        last = (
            newlines + inside + 1
            if end == len(text) or text[end - 1] != "\n"
            else newlines + inside
        )
        mapped = ordered[bisect.bisect_left(lines_at, first) : bisect.bisect_right(lines_at, last)]
        part_text = text[start:end]
        if index == len(ranges) - 1:
            part_text += cut_note
        if index == 0:
            shown = len(part_text)
            events.append(
                {
                    "type": kind,
                    "text": part_text,
                    "sources": mapped,
                    "parts": len(ranges) - 1,
                    "shown_chars": shown,
                    "full_chars": len(text) + len(cut_note),
                }
            )
        else:
            events.append(
                {
                    "type": "text_part",
                    "output": kind,
                    "part": index,
                    "text": part_text,
                    "sources": mapped,
                }
            )
        newlines += inside
    if len(events) > 1:
        head = events[0]
        follows = head["full_chars"] - head["shown_chars"]
        head["text"] += (
            f"… ({follows} more characters follow in {len(events) - 1} text_part events)\n"
        )
    return events


def mapped_ir_events(
    kind: str, text: str, mapper: Callable[..., list[dict[str, int]]], *args: Any
) -> list[dict[str, Any]]:
    """``ir_events`` of ``text`` with the source map ``mapper(*args, text)`` gives.
    A mapping that fails is left empty: the text itself is still exact. Every line
    is mapped: a long text's map is split with it."""
    try:
        sources = mapper(*args, text)
    except Exception as exc:
        print(f"jaxplay: source mapping failed: {type(exc).__name__}: {exc}", file=sys.__stderr__)
        sources = []
    return ir_events(kind, text, sources)
