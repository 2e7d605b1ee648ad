"""The IR comes before anything that can take long (docs/api.md, "Big programs"): a run
whose wall clock runs out in its call has shown its jaxpr, StableHLO, HLO and cost
already, and says the stage it ran out in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

# compiles at once, and its call never returns
FOREVER = (
    "def f(x):\n"
    "    return lax.while_loop(lambda c: c[1] > 0, lambda c: (c[0] + 1, c[1]), (0, x))[0]\n"
)


@pytest.mark.slow
def test_a_run_out_of_time_in_its_call_has_shown_its_ir(
    run: Callable[[dict[str, Any]], list[dict[str, Any]]],
) -> None:
    events = run(
        {
            "code": FOREVER,
            "args": "1.0",
            "transforms": [{"name": "jit"}],
            "outputs": ["jaxpr", "stablehlo", "hlo", "cost", "value", "timing", "shapes"],
            "timeout_s": 5,
        }
    )
    done = events[-1]
    assert done["status"] == "timeout" and done["timeout_stage"] == "execute", done
    shown = {e["type"]: e for e in events}
    for kind in ("jaxpr", "stablehlo", "hlo", "cost", "shapes"):
        assert kind in shown, (kind, [e["type"] for e in events])
    assert "while" in shown["jaxpr"]["text"] and "while" in shown["hlo"]["text"]
    assert "value" not in shown and "timing" not in shown
