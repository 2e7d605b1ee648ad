"""An agent's answer from a run's events (backend/app/outside/mcp/results.py): a text that came
in parts is one output, its size the whole text's."""

from __future__ import annotations

from backend.app.outside.mcp.results import run_outputs
from sandbox.engine.core.text_parts import ir_events
from sandbox.protocol.limits import TEXT_PART_CHARS


def test_a_text_in_parts_is_one_output_of_its_whole_size() -> None:
    text = "".join(
        f"  %{i} = f32[3] add(%{i - 1}, %{i - 1})\n" for i in range(TEXT_PART_CHARS // 10)
    )
    parts = [{**e, "pipeline": "main"} for e in ir_events("stablehlo", text, [])]
    assert len(parts) > 2
    answer = run_outputs([*parts, {"type": "done", "status": "ok", "ms": 5.0}], 1000)
    (out,) = answer["outputs"]
    assert out["type"] == "stablehlo" and out["chars"] == len(text) and out["truncated"]
    assert out["text"] == text[:1000]
