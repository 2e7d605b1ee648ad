"""The buffers of XLA's buffer assignment (``*-buffer-assignment.txt``): each value
with its bytes, shape, kind (argument, output, temporary, constant) and the user's
line that made it."""

from __future__ import annotations

import re
from typing import Any

_DTYPE_SHAPE = re.compile(r"^([a-z]+[0-9]*)\[([0-9,]*)\]")
_KINDS = (("parameter", "argument"), ("constant", "constant"), ("live-out", "output"))


def buffers_of(text: str, lines_of: dict[str, set[int]]) -> list[dict[str, Any]]:
    buffers: list[dict[str, Any]] = []
    kind = "temp"
    for line in text.splitlines():
        if line.startswith("allocation "):
            kind = next((k for word, k in _KINDS if word in line), "temp")
            continue
        value = re.match(
            r"^ value: <\d+ ([\w.-]+)(?: \{[\d,]*\})? @\d+> \(size=(\d+),offset=\d+\): (.+)$", line
        )
        if not value:
            continue
        name, size, shape_text = value.group(1), int(value.group(2)), value.group(3)
        shape = _DTYPE_SHAPE.match(shape_text)
        lines = sorted(lines_of.get(name, ()))
        buffers.append(
            {
                "bytes": size,
                "shape": [int(d) for d in shape.group(2).split(",") if d] if shape else [],
                "dtype": shape.group(1) if shape else shape_text[:256],
                "kind": kind,
                "line": lines[0] if lines else None,
                "name": name[:1024],
            }
        )
    return buffers
