"""Writes events as JSON lines to the worker's event pipe, and captures prints.

User output is relayed as ``stdout``/``stderr`` events marked with the stage it was
printed in, so a user sees that a plain ``print`` ran once at trace time while
``jax.debug.print`` runs on every call.
"""

from __future__ import annotations

import io
import json
import math
import os
import threading
from typing import Any

#: A single captured write over this is split into several events.
_MAX_TEXT_EVENT = 16 * 1024


def _json_default(value: Any) -> Any:
    # numpy scalars and other stray values: keep the JSON valid, never crash the run
    try:
        return value.item()
    except Exception:
        return repr(value)


def json_safe(value: Any) -> Any:
    """Replace non-finite floats (not valid JSON) by the strings "nan", "inf", "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


class Emitter:
    """Thread-safe writer of events; knows the current stage and pipeline.

    ``tag``: the run's token from the worker message (known to the supervisor and the
    engine only): every line is written as ``TAG SPACE JSON``, and the supervisor's
    gate refuses, counts and flags a line without it (sandbox/supervisor/event_gate.py). User
    code that writes to the event pipe on its own does not know it, so what it forges
    is told apart from what the engine writes. It is a tell, not a boundary: code in
    the process could find the token in memory; what crosses tenants is decided by
    pristine runs alone (docs/sandbox.md)."""

    def __init__(self, fd: int, tag: str = "") -> None:
        self._fd = fd
        self._prefix = (tag + " ").encode() if tag else b""
        self._lock = threading.RLock()
        self.stage: str = "exec"
        self.pipeline: str = "main"
        self.streams: list[CapturedStream] = []
        #: lines printed while output is muted (timing loops), reported as a count
        self.muted_lines = 0
        self.muted = False

    def emit(self, event: dict[str, Any], *, pipeline: str | None = None) -> None:
        with self._lock:
            self.flush_streams()
            self._write(event, pipeline)

    def flush_streams(self) -> None:
        with self._lock:
            for stream in self.streams:
                stream.flush_pending()

    def _write(self, event: dict[str, Any], pipeline: str | None) -> None:
        event.setdefault("pipeline", self.pipeline if pipeline is None else pipeline)
        try:
            # most events hold no NaN or infinity: walking every value of a big one to
            # look for them (json_safe) cost a 300-layer MLP's run ~0.1 s
            data = json.dumps(event, default=_json_default, allow_nan=False)
        except ValueError:  # a non-finite float somewhere: written as a string
            data = json.dumps(json_safe(event), default=_json_default, allow_nan=False)
        buf = self._prefix + data.encode() + b"\n"
        while buf:
            written = os.write(self._fd, buf)
            buf = buf[written:]

    def emit_text(self, kind: str, text: str) -> None:
        with self._lock:
            if self.muted:
                self.muted_lines += max(1, text.count("\n"))
                return
            for start in range(0, len(text), _MAX_TEXT_EVENT):
                chunk = text[start : start + _MAX_TEXT_EVENT]
                self._write({"type": kind, "text": chunk, "stage": self.stage}, None)


class CapturedStream(io.TextIOBase):
    """A ``sys.stdout``/``sys.stderr`` replacement that turns lines into events."""

    def __init__(self, emitter: Emitter, kind: str) -> None:
        self._emitter = emitter
        self._kind = kind
        self._pending = ""
        emitter.streams.append(self)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self._emitter._lock:
            self._pending += text
            if "\n" in self._pending:
                head, _, self._pending = self._pending.rpartition("\n")
                self._emitter.emit_text(self._kind, head + "\n")
            elif len(self._pending) >= _MAX_TEXT_EVENT:
                self.flush_pending()
        return len(text)

    def flush(self) -> None:
        self.flush_pending()

    def flush_pending(self) -> None:
        with self._emitter._lock:
            if self._pending:
                text, self._pending = self._pending, ""
                self._emitter.emit_text(self._kind, text)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def isatty(self) -> bool:
        return False
