"""Event lines: one event as one line of JSON (the wire format between worker and
server), and a line read back as an event, checked and validated."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from sandbox.protocol.events import EVENT_ADAPTER
from sandbox.protocol.limits import MAX_EVENT_BYTES, MAX_EVENT_DEPTH, MAX_EVENT_NODES


class BadEvent(ValueError):
    """A line that is not an event jaxplay accepts; the message says why, in a few
    words that never quote the line."""


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def check_line_shape(line: bytes) -> None:
    """Size, JSON values and depth of one line, from its raw bytes, without
    building any of it: strings are blanked (a C regex), then the structural
    bytes are counted, and pairs of brackets peeled one level per pass."""
    if len(line) > MAX_EVENT_BYTES:
        raise BadEvent(f"a line over {MAX_EVENT_BYTES} bytes")
    skeleton = _JSON_STRING.sub(b'""', line)
    nodes = len(skeleton) - len(skeleton.translate(None, b",[{")) + 1
    if nodes > MAX_EVENT_NODES:
        raise BadEvent(f"a line of over {MAX_EVENT_NODES} JSON values")
    brackets = skeleton.translate(_BRACKETS, _NOT_BRACKETS)
    for _ in range(MAX_EVENT_DEPTH):
        if not brackets:
            return
        brackets = brackets.replace(b"[]", b"")
    if brackets:
        raise BadEvent(f"a line nested deeper than {MAX_EVENT_DEPTH}")


def _why(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_input=False)[0]
    # a location names fields of ours, list indices, or (for a bad key) the
    # line's own text: that is never repeated
    where = ".".join(
        str(part) if isinstance(part, int) or (part.isidentifier() and len(part) < 32) else "?"
        for part in first["loc"][:4]
    )
    return f"not a valid event ({first['type']} at {where or 'top'})"[:200]


def parse_event_line(line: bytes) -> dict[str, Any]:
    """One line a worker wrote, as an event: shape checked before it is parsed (no
    NaN, no infinity, valid UTF-8, no lone surrogate), then validated and dumped
    with only its declared fields. Raises ``BadEvent``."""
    check_line_shape(line)
    try:
        model = EVENT_ADAPTER.validate_json(line)
    except ValidationError as exc:
        raise BadEvent(_why(exc)) from None
    return _dump(model)


def validate_event(event: Any) -> dict[str, Any]:
    """An event already parsed (from a pool, the cache, Redis): validated the same way."""
    try:
        model = EVENT_ADAPTER.validate_python(event)
    except ValidationError as exc:
        raise BadEvent(_why(exc)) from None
    return _dump(model)


#: fields left out of an event unless set, rather than sent as null
_ABSENT_UNLESS_SET = (
    "cached", "cached_at", "age_s", "dropped", "timeout_stage", "parts", "shown_chars",
    "full_chars",
)  # fmt: skip


class ValidEvent(dict[str, Any]):
    """An event as ``parse_event_line`` or ``validate_event`` made it from a model of
    events.py (typed, bounded, its declared fields only). Only they make one (a
    worker writes bytes), so a reader in the same process that gets one unchanged
    need not validate it again (backend/app/relay/service.py); any other dict it validates."""

    __slots__ = ()


def _dump(model: BaseModel) -> ValidEvent:
    event = model.model_dump(by_alias=True)
    event = ValidEvent(type=event.pop("type"), **event)
    for name in _ABSENT_UNLESS_SET:
        if event.get(name, 0) is None:
            del event[name]
    worker = event.get("worker")
    if isinstance(worker, dict):
        for name in ("libraries", "matmul_precision"):
            if worker.get(name, 0) is None:
                del worker[name]  # absent unless the worker says them, like the above
    return event


def encode_event(event: dict[str, Any]) -> bytes:
    """One event as one line of JSON (the wire format between worker and server)."""
    return json.dumps(event, separators=(",", ":"), allow_nan=False).encode() + b"\n"
