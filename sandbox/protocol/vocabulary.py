"""The protocol's words that need no model: the outputs a request may name, the stages
and statuses events name, the fixed reasons a ``done`` gives. Kept apart from
``events`` (whose models take a tenth of a second to build) so that a client that
only needs the words, such as ``jaxplay run --server``, starts without building them.
``events`` re-exports every name here."""

from __future__ import annotations

from typing import Literal

#: Every output a request may name; what each one is (its event, the stages it
#: needs, whether a request gets it by default, whether the cache may keep it) is
#: ``OUTPUT_TABLE`` (output_table.py), the one place an output is declared in this layer.
Output = Literal[
    "jaxpr", "stablehlo", "hlo", "value", "cost", "timing", "passes", "asm", "memory", "remarks",
    "sharding", "shapes", "profile", "kernels", "autodiff",
    "trace_values",
    "checks",
    "recompiles", "export",
    "numerics",
]  # fmt: skip
OUTPUTS: tuple[Output, ...] = Output.__args__  # type: ignore[attr-defined]
#: what ``stage`` events name, in the order they happen (SPEC §2's five, plus
#: ``args``, evaluating the example arguments, and ``timing``, the comparison)
STAGES = ("exec", "args", "trace", "lower", "compile", "execute", "timing")
#: what ``error`` events may name besides: before exec (``request``, ``config``),
#: building the pipeline from its options (``transform``), and jaxplay's own failure
ERROR_STAGES = ("request", "config", *STAGES[:2], "transform", *STAGES[2:], "engine")

#: Where an error's ``doc_url`` may point: JAX's documentation (and Python's, for a
#: syntax error); anything else is not an event jaxplay made.
DOC_URL_PREFIXES = (
    "https://docs.jax.dev/",
    "https://jax.readthedocs.io/",
    "https://docs.python.org/3/",
)
DONE_STATUSES = ("ok", "error", "timeout", "killed", "cancelled", "tampered")
#: ``tampered``: the run's event channel carried lines the engine did not write (the
#: gate refused them; ``dropped`` counts them). Its outputs are never cache evidence.
TAMPERED_REASON = "this run's code wrote to jaxplay's output channel; what it shows may be forged"
#: How the reason of a run out of time ends (the supervisor's relay writes it; a server
#: says after it how much longer it allows: backend/app/relay/timeouts.py)
TIMEOUT_LONGER = "; a longer timeout_s may let it finish"
#: The reasons a worker's own ``done`` gives (anything else is not the engine's)
WORKER_DONE_REASONS = ("", "the code raised an error", "invalid request")
