"""What a run's worker may tell: each line it writes, checked twice before it passes.

User code shares its process with the engine, so it can write to the event pipe
too. A line passes only if it is an event of the protocol (``parse_event_line``:
bounded before it is parsed, typed and bounded after) *and* one this run could have
made, judged by what the supervisor knows of it: the request's outputs and
pipelines, the stages those need, each result and stage at most once per pipeline,
no more errors than a run can raise, a stage no longer than the run so far. Events
only jaxplay may send are rebuilt or kept back: ``accepted`` passes only as the very
first event (the engine writes it before any user code runs) and carries the
supervisor's run id; the worker's ``done`` is kept for the supervisor, which writes
the real one; ``cached`` is the server's to add. What fails is dropped and counted.

The engine tags each line with the run's token (``TOKEN SPACE JSON``; the worker
message carries it, sandbox/engine/core/emitter.py): a line without it is refused before
anything else, so what user code writes to the pipe on its own is told apart from
the engine's, and the engine's own jaxpr is shown rather than a forged one written
first. The ``worker`` of ``accepted`` is the pool's (``identify``), never the line's.
Any refused line makes the run ``tampered`` (sandbox/supervisor/relay.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sandbox.protocol.lines import BadEvent, parse_event_line
from sandbox.protocol.output_table import OUTPUT_TABLE
from sandbox.protocol.requests import RunRequest
from sandbox.protocol.vocabulary import OUTPUTS, STAGES, WORKER_DONE_REASONS

#: Refused lines after which the run is ended (a run jaxplay made has none).
MAX_REFUSED_LINES = 100
#: Stages that run once per run, in the main pipeline, whatever the pipelines.
_RUN_STAGES = frozenset({"exec", "args", "timing"})


def allowed_stages(request: RunRequest) -> frozenset[str]:
    """The stages the engine reports for this request (its outputs' in OUTPUT_TABLE)."""
    stages = {"exec", "args"}
    for output in request.outputs:
        stages.update(OUTPUT_TABLE[output].stages)
    return frozenset(stages)


class EventGate:
    """One run's gate: ``admit`` each line; ``dropped`` counts what was refused."""

    def __init__(
        self,
        request: RunRequest,
        run_id: str,
        *,
        token: str = "",
        identify: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.run_id = run_id
        #: what each line starts with ("" for a worker that does not tag its lines)
        self._tag = (token + " ").encode() if token else b""
        #: the worker ``accepted`` carries, given the one its line claims
        self._identify = identify
        self._request = request
        self._outputs = frozenset(request.outputs)
        self._pipelines = frozenset(name for name, _ in request.pipelines())
        self._stages = allowed_stages(request)
        # per pipeline: an error in exec/args/config, one per stage that fails,
        # one per view that fails to render, one per timing row; and jaxplay's own
        self._max_errors = 3 + 8 * len(self._pipelines)
        self._seen: set[tuple[str, str]] = set()
        #: per (IR output, pipeline) whose text comes in parts: [parts announced,
        #: the next part expected]
        self._parts: dict[tuple[str, str], list[int]] = {}
        #: the stages reported so far, in order: (stage, pipeline, ms)
        self.stages_done: list[tuple[str, str, float]] = []
        self.passed = 0
        self.errors = 0
        self.dropped = 0
        self.first_refusal = ""
        #: the worker's own ``done`` (its status), kept for the supervisor
        self.worker_done: dict[str, Any] | None = None

    def admit(self, line: bytes, elapsed_ms: float) -> dict[str, Any] | None:
        """The event to relay for this line, or None (refused, or kept back)."""
        try:
            if self._tag:
                if not line.startswith(self._tag):
                    raise BadEvent("a line the engine did not write (no run token)")
                line = line[len(self._tag) :]
            return self._check(parse_event_line(line), elapsed_ms)
        except BadEvent as exc:
            self.dropped += 1
            self.first_refusal = self.first_refusal or str(exc)
            return None

    def _check(self, event: dict[str, Any], elapsed_ms: float) -> dict[str, Any] | None:
        kind = event["type"]
        if kind == "done":
            if self.worker_done is not None:
                raise BadEvent("a second done")
            if event["reason"] not in WORKER_DONE_REASONS or event.get("cached"):
                raise BadEvent("a done the engine does not write")
            self.worker_done = event
            return None
        pipeline = event["pipeline"]
        if pipeline not in self._pipelines:
            raise BadEvent(f"pipeline {pipeline!r} is not in the request")
        if kind == "accepted":
            event = self._accepted(event)
        elif kind in OUTPUTS:
            if kind not in self._outputs:
                raise BadEvent(f"a {kind} event the request did not ask for")
            if not OUTPUT_TABLE[kind].per_pipeline and pipeline != "main":
                raise BadEvent(f"a {kind} event outside the main pipeline")
            if kind == "timing":
                self._timing(event)
            self._once(kind, pipeline)
            if event.get("parts"):
                self._parts[(kind, pipeline)] = [event["parts"], 1]
        elif kind == "text_part":
            self._text_part(event)
        elif kind == "stage":
            self._stage(event, elapsed_ms)
        elif kind == "error":
            self.errors += 1
            if self.errors > self._max_errors:
                raise BadEvent(f"more than {self._max_errors} errors")
        self.passed += 1
        return event

    def _accepted(self, event: dict[str, Any]) -> dict[str, Any]:
        if self.passed:
            raise BadEvent("an accepted that is not the first event")
        worker = event["worker"]
        if self._identify is not None:
            worker = self._identify(worker)
        wanted = self._request.backend
        if wanted != "auto" and worker["backend"] != wanted:
            raise BadEvent("an accepted from another backend than the request's")
        return {"type": "accepted", "pipeline": "main", "run_id": self.run_id, "worker": worker}

    def _stage(self, event: dict[str, Any], elapsed_ms: float) -> None:
        stage, pipeline = event["stage"], event["pipeline"]
        if stage not in self._stages:
            raise BadEvent(f"a {stage} stage this request does not have")
        if stage in _RUN_STAGES and pipeline != "main":
            raise BadEvent(f"a {stage} stage outside the main pipeline")
        if event["ms"] > elapsed_ms + 5:
            raise BadEvent("a stage longer than the run so far")
        self._once(f"stage {stage}", pipeline)
        self.stages_done.append((stage, pipeline, event["ms"]))

    def running_stage(self) -> str:
        """The stage the run is in now: the one after the last reported, in the order
        this request's stages come (``exec``, ``args``, each pipeline's own, then
        ``timing``). Outputs are made between stages, so a run stopped while printing
        a big HLO is counted in the stage after ``compile``."""
        order = [s for s in STAGES if s in self._stages]
        sequence = [(s, "main") for s in order if s in ("exec", "args")]
        for name, _ in self._request.pipelines():
            sequence += [(s, name) for s in order if s not in _RUN_STAGES]
        sequence += [(s, "main") for s in order if s == "timing"]
        if not self.stages_done:
            return sequence[0][0]
        last = self.stages_done[-1][:2]
        index = sequence.index(last) if last in sequence else len(sequence) - 1
        return sequence[min(index + 1, len(sequence) - 1)][0]

    def _text_part(self, event: dict[str, Any]) -> None:
        """A ``text_part`` passes only as the next of the parts its output's event
        announced, in that output's pipeline."""
        key = (event["output"], event["pipeline"])
        announced = self._parts.get(key)
        if announced is None or event["part"] != announced[1] or announced[1] > announced[0]:
            raise BadEvent(f"a {event['output']} text part its event did not announce")
        announced[1] += 1

    def _timing(self, event: dict[str, Any]) -> None:
        if any(row["pipeline"] not in self._pipelines for row in event["rows"]):
            raise BadEvent("a timing row of a pipeline that is not in the request")

    def _once(self, what: str, pipeline: str) -> None:
        key = (what, pipeline)
        if key in self._seen:
            raise BadEvent(f"a second {what} event")
        self._seen.add(key)
