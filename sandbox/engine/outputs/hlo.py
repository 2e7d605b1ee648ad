"""The ``hlo`` output: the compiled module's HLO, after XLA's passes, each
instruction mapped to the user's line by its metadata."""

from __future__ import annotations

from typing import Any

from sandbox.engine.core import sources
from sandbox.engine.core.output import Output, Results
from sandbox.engine.core.text_parts import mapped_ir_events


def hlo_events(r: Results) -> list[dict[str, Any]]:
    return mapped_ir_events("hlo", r.hlo_text(), sources.hlo_sources)


OUTPUT = Output("compiled", "printing the HLO", hlo_events)
