"""The supervisor: every run's events pass through it, from a worker it trusts in
nothing to whoever asked for the run.

``relay`` starts (or is handed) one worker process for one run, relays its events
with size caps, enforces the wall clock and the output limits from outside, and
always ends the stream with exactly one ``done``; ``event_gate`` is the check each
of the worker's lines passes (bounded parse, typed events, only what this run could
have made). The names below are the ones the layers above use.
"""

from sandbox.supervisor.event_gate import MAX_REFUSED_LINES, EventGate, allowed_stages
from sandbox.supervisor.relay import (
    MAX_EVENT_BYTES,
    OutputLimits,
    RunSupervisor,
    SupervisedRun,
    WorkerStartError,
    human_bytes,
    worker_message,
)

__all__ = [
    "MAX_EVENT_BYTES",
    "MAX_REFUSED_LINES",
    "EventGate",
    "OutputLimits",
    "RunSupervisor",
    "SupervisedRun",
    "WorkerStartError",
    "allowed_stages",
    "human_bytes",
    "worker_message",
]
