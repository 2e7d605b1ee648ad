"""A long IR text's parts joined back into its event (sandbox/protocol/text_parts.py),
as the engine splits them (sandbox/engine/core/text_parts.py): what the server reads
when it needs a whole text (a diff across versions, an agent's answer)."""

from __future__ import annotations

from typing import Any

from sandbox.engine.core.text_parts import ir_events
from sandbox.protocol.limits import TEXT_PART_CHARS
from sandbox.protocol.text_parts import join_parts

LINE = "  %x = stablehlo.tanh %y : tensor<32x64xf32>".ljust(63) + "\n"


def _long(kind: str, pipeline: str, lines: int) -> tuple[str, list[dict[str, Any]], list[dict]]:
    text = LINE * lines
    sources = [{"out_line": n, "line": n % 9 + 1} for n in range(1, lines + 1)]
    events = [{**e, "pipeline": pipeline} for e in ir_events(kind, text, sources)]
    return text, sources, events


def test_a_text_in_parts_is_one_event_where_its_first_part_was() -> None:
    text, sources, parts = _long("hlo", "main", 2 * TEXT_PART_CHARS // len(LINE))
    assert len(parts) == 3  # the event and two text_part events
    accepted = {"type": "accepted", "worker": {}}
    value = {"type": "value", "pipeline": "main", "repr": "1.0"}
    done = {"type": "done", "status": "ok"}
    out = join_parts([accepted, *parts, value, done])
    assert [e["type"] for e in out] == ["accepted", "hlo", "value", "done"]
    hlo = out[1]
    assert hlo["text"] == text and hlo["sources"] == sources
    assert hlo["full_chars"] == len(text) and "parts" not in hlo and "shown_chars" not in hlo


def test_two_pipelines_parts_interleaved_are_each_joined_to_their_own() -> None:
    text_a, _, a = _long("jaxpr", "0", TEXT_PART_CHARS // len(LINE) + 10)
    text_b, _, b = _long("jaxpr", "1", TEXT_PART_CHARS // len(LINE) + 20)
    assert len(a) == len(b) == 2
    out = join_parts([a[0], b[0], b[1], a[1]])
    assert [(e["pipeline"], e["text"]) for e in out] == [("0", text_a), ("1", text_b)]


def test_a_run_that_ended_before_its_last_part_shows_what_came_and_says_so() -> None:
    text, _, parts = _long("stablehlo", "main", 2 * TEXT_PART_CHARS // len(LINE))
    (out,) = join_parts(parts[:2])
    shown = parts[0]["text"][: parts[0]["shown_chars"]] + parts[1]["text"]
    assert out["text"] == shown + "\n… the run ended after 1 of 2 parts of this text"
    assert text.startswith(shown) and len(shown) < len(text)


def test_a_part_nothing_announced_or_out_of_order_is_dropped() -> None:
    _, _, parts = _long("hlo", "main", 2 * TEXT_PART_CHARS // len(LINE))
    stray = {**parts[1], "pipeline": "other"}
    out = join_parts([stray, parts[0], parts[2], parts[1], parts[2]])
    assert len(out) == 1 and out[0]["text"].endswith(parts[2]["text"])
    assert "ended after" not in out[0]["text"]


def test_a_short_text_is_untouched() -> None:
    events = [{"type": "jaxpr", "pipeline": "main", "text": "{ lambda ; }", "sources": []}]
    assert join_parts(events) == events
