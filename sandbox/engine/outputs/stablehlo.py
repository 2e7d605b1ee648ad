"""The ``stablehlo`` output: the lowered module's StableHLO, each line mapped to the
user's line through the locations JAX records (printed a second time with them)."""

from __future__ import annotations

from typing import Any

from sandbox.engine.core.compat import stablehlo_with_locations
from sandbox.engine.core.output import Output, Results
from sandbox.engine.core.sources import mlir_sources
from sandbox.engine.core.text_parts import mapped_ir_events


def stablehlo_events(r: Results) -> list[dict[str, Any]]:
    lowered = r.lowered

    def mapper(plain: str) -> list[dict[str, int]]:
        return mlir_sources(plain, stablehlo_with_locations(lowered))

    return mapped_ir_events("stablehlo", lowered.as_text(), mapper)


OUTPUT = Output("lowered", "printing the StableHLO", stablehlo_events)
