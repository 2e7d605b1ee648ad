"""The CLI shows an IR text that came in parts whole: the first part without the line
saying what follows (for clients that do not join parts), then each part."""

from __future__ import annotations

from backend.cli.render.events import render_event
from sandbox.engine.core.text_parts import ir_events
from sandbox.protocol.limits import TEXT_PART_CHARS


def test_a_text_in_parts_is_shown_whole_and_only_once() -> None:
    lines = [f"  %{i} = add(%{i - 1}, %{i - 1})".ljust(70) for i in range(9_000)]
    text = "\n".join(lines)
    events = ir_events("hlo", text, [])
    assert len(events) == 3 and len(text) > 2 * TEXT_PART_CHARS
    shown = "\n".join(str(render_event({**e, "pipeline": "main"})) for e in events)
    assert shown == "── HLO (optimised) ──\n" + text  # its lines as they are, spaces too
    assert "more characters follow" not in shown
