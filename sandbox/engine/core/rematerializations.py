"""XLA's "involuntary full rematerialization": the SPMD partitioner found no
collective that takes a value from one sharding to another, so it replicates the
whole value on every device and slices it again. XLA says so only in a C++ log line
on standard error (core/compile_log.py keeps the compile's), in one of two spellings:

- jax 0.12 (spmd_partitioner.cc, ``LOG(WARNING)``): ``[SPMD] Involuntary full
  rematerialization. The compiler cannot go from sharding {A} to {B} efficiently for
  HLO operation %op = ... metadata={...}. As the last resort, ...``
- before: ``[spmd] Involuntary full rematerialization. The compiler was not able to go
  from sharding {A} to {B} without doing a full rematerialization of the tensor for HLO
  operation: %op = .... You probably want to enrich the sharding annotations ...``

Each becomes a remark at the user's line of the HLO operation (its metadata, resolved
against the compiled module's stack-frame tables), with both shardings as XLA prints
them.
"""

from __future__ import annotations

import re
from typing import Any

from sandbox.engine.core.sources import hlo_instruction_line
from sandbox.protocol.limits import MAX_MESSAGE_CHARS, MAX_REMATS

HEAD = re.compile(r"\[spmd\] Involuntary full rematerialization\.", re.IGNORECASE)
_FROM = re.compile(r"go from sharding ")
_OPERATION = re.compile(r"for HLO operation:? ")
_OPERATION_END = re.compile(r"\. (?:As the last resort|You probably want)")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')


def _braced(text: str, start: int) -> tuple[str, int] | None:
    """The ``{...}`` that starts at ``start`` (nested braces counted) and where it ends."""
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    for index in range(start, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return text[start : index + 1], index + 1
    return None


def rematerializations(log: str, module: str) -> list[dict[str, Any]]:
    """Every involuntary full rematerialization the compile's log reports, in order:
    the two shardings, the HLO operation, its ``op_name`` and the user's line."""
    found: list[dict[str, Any]] = []
    for head in HEAD.finditer(log):
        end = log.find("\n", head.end())
        message = log[head.start() : end if end >= 0 else len(log)]
        item = _parse(message, module)
        if item is not None:
            found.append(item)
        if len(found) >= MAX_REMATS:
            break
    return found


def _parse(message: str, module: str) -> dict[str, Any] | None:
    start = _FROM.search(message)
    if start is None:
        return None
    source = _braced(message, start.end())
    if source is None or not message.startswith(" to ", source[1]):
        return None
    target = _braced(message, source[1] + len(" to "))
    operation = _OPERATION.search(message, target[1]) if target else None
    if target is None or operation is None:
        return None
    stop = _OPERATION_END.search(message, operation.end())
    instruction = message[operation.end() : stop.start() if stop else len(message)]
    op_name = _OP_NAME.search(instruction)
    return {
        "line": hlo_instruction_line(module, instruction),
        "from_sharding": source[0][:256],
        "to_sharding": target[0][:256],
        "op_name": op_name.group(1)[:256] if op_name else "",
        "instruction": instruction[:MAX_MESSAGE_CHARS],
        "message": message[:MAX_MESSAGE_CHARS],
    }
