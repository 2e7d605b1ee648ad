"""The CLI says what a run out of time says over REST (its reason: the stage, what the
stages before took, how much longer this server allows), and how to ask for more time
from the command line."""

from __future__ import annotations

from backend.app.relay.timeouts import LONGER, timeout_reason
from backend.cli.render.events import render_event

REASON = "wall clock 20 s, reached in the lower stage (stages done: exec 9.6 s, trace 7.1 s)"


def test_a_timeout_says_the_stage_and_how_to_ask_for_more_time() -> None:
    reason = timeout_reason(REASON + LONGER, 20, 60)
    text = render_event({"type": "done", "status": "timeout", "ms": 20004.0, "reason": reason})
    assert text is not None
    first, hint = text.splitlines()
    assert first == f"# done: timeout ({reason}) in 20004 ms"
    assert "reached in the lower stage" in first and "this server allows up to 60 s" in first
    assert hint == "  hint: run it again with --timeout SECONDS for more time"


def test_no_hint_when_the_run_had_the_longest_limit_or_did_not_time_out() -> None:
    reason = timeout_reason(REASON.replace("20 s", "60 s") + LONGER, 60, 60)
    text = render_event({"type": "done", "status": "timeout", "ms": 60004.0, "reason": reason})
    assert text is not None and "--timeout" not in text and "longest limit" in text
    ok = render_event({"type": "done", "status": "ok", "ms": 12.0, "reason": ""})
    assert ok == "# done: ok in 12 ms"
