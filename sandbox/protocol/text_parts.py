"""Joining a long IR text's parts back into its event, as a client does (docs/api.md,
"Big texts"; the engine's side is sandbox/engine/core/text_parts.py, the page's
frontend/src/connection/text-parts.ts).

A ``jaxpr``, ``stablehlo`` or ``hlo`` event with ``parts`` carries the text's first
part (its ``text`` up to ``shown_chars``; after it, a line for clients that do not
join) and is followed, in order, by that many ``text_part`` events of its output and
pipeline. Whoever reads a whole text (a diff across versions, an agent's answer)
reads the joined event, never the first part alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: the outputs whose text may come in parts
IR_OUTPUTS = frozenset({"jaxpr", "stablehlo", "hlo"})


def joined(events: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The whole text and source map of an output's event and its ``text_part``
    events (in order)."""
    head, *rest = events
    text = head["text"][: head["shown_chars"]] if head.get("parts") else head["text"]
    sources = list(head.get("sources") or [])
    for part in rest:
        text += part["text"]
        sources += part.get("sources") or []
    return text, sources


def join_parts(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's events with each IR text whole: an announcing event and its
    ``text_part`` events become one event (``parts`` gone, ``full_chars`` kept), where
    the first part was. A text whose run ended before every part came is what came,
    with a line saying so; a part that follows nothing is dropped (the server's gate
    passes none)."""
    out: list[dict[str, Any]] = []
    pending: dict[tuple[str, str], tuple[int, list[dict[str, Any]]]] = {}

    def finish(key: tuple[str, str], note: str = "") -> None:
        index, pieces = pending.pop(key)
        text, sources = joined(pieces)
        head = {k: v for k, v in pieces[0].items() if k not in ("parts", "shown_chars")}
        out[index] = {**head, "text": text + note, "sources": sources}

    for event in events:
        kind = event.get("type")
        key = (str(event.get("pipeline", "main")), str(event.get("output", kind)))
        if kind in IR_OUTPUTS and event.get("parts"):
            pending[key] = (len(out), [event])
            out.append(event)  # its place, filled when its last part is in
        elif kind == "text_part":
            if key not in pending or event.get("part") != len(pending[key][1]):
                continue
            pending[key][1].append(event)
            if len(pending[key][1]) > pending[key][1][0]["parts"]:
                finish(key)
        else:
            out.append(event)
    for key, (_, pieces) in list(pending.items()):
        finish(
            key,
            f"\n… the run ended after {len(pieces) - 1} of {pieces[0]['parts']} parts of this text",
        )
    return out
