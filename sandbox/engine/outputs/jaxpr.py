"""The ``jaxpr`` output: the pipeline's jaxpr as JAX prints it, each equation mapped
to the user's line."""

from __future__ import annotations

from typing import Any

from sandbox.engine.core import sources
from sandbox.engine.core.output import Output, Results
from sandbox.engine.core.text_parts import mapped_ir_events


def jaxpr_events(r: Results) -> list[dict[str, Any]]:
    text, spans = sources.printed_jaxpr(r.closed)  # printed once, with its spans
    return mapped_ir_events("jaxpr", text, sources.spans_sources, spans)


OUTPUT = Output("traced", "printing the jaxpr", jaxpr_events)
