"""The bytes of an HLO value as XLA's live-range analysis counts them
(``ShapeUtil::ByteSizeOf(shape, /*pointer_size=*/8)``): an array's elements times its
element's bytes, a tuple's 8 bytes per element. Read from each instruction's shape in
the optimised HLO text, for the values the buffer assignment lists no size of (a
while loop's parameter tuples, which share their loop's buffers)."""

from __future__ import annotations

import math
import re

#: bytes per element of each HLO element type (``token`` holds none)
_ELEMENT_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3b11fnuz": 1,
    "f8e4m3fnuz": 1, "f8e5m2fnuz": 1, "f8e4m3": 1, "f8e3m4": 1, "f8e8m0fnu": 1,
    "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "s32": 4, "u32": 4, "f32": 4,
    "s64": 8, "u64": 8, "f64": 8, "c64": 8,
    "c128": 16, "token": 0,
}  # fmt: skip
_POINTER_BYTES = 8
_DEFINED = re.compile(r"^\s+(?:ROOT )?%?([\w.-]+) = (.+)$")
_ARRAY = re.compile(r"([a-z]\w*)\[([\d,]*)\](?:\{[^}]*\})?")


def instruction_shapes(hlo_text: str) -> dict[str, str]:
    """Each instruction of the module: the text of its shape (``f32[8,16]{1,0}``,
    ``(s32[], f32[8,16]{1,0})``)."""
    shapes: dict[str, str] = {}
    for line in hlo_text.splitlines():
        defined = _DEFINED.match(line)
        if defined:
            shapes[defined.group(1)] = _shape_prefix(defined.group(2))
    return shapes


def byte_size(shape: str, index: str) -> int | None:
    """The bytes of the value at ``index`` (``{}``, ``{3}``, ``{1,0}``) of ``shape``,
    or None for a shape this does not read."""
    element = shape
    for i in (int(n) for n in index.strip("{}").split(",") if n):
        parts = _tuple_elements(element)
        if parts is None or i >= len(parts):
            return None
        element = parts[i]
    parts = _tuple_elements(element)
    if parts is not None:
        return _POINTER_BYTES * len(parts)
    array = _ARRAY.fullmatch(element.strip())
    if not array or array.group(1) not in _ELEMENT_BYTES:
        return None
    dims = [int(d) for d in array.group(2).split(",") if d]
    return math.prod(dims) * _ELEMENT_BYTES[array.group(1)]


def _shape_prefix(rest: str) -> str:
    """The shape at the start of an instruction's right-hand side: an array up to its
    layout, or a tuple up to its closing parenthesis."""
    if rest.startswith("("):
        depth = 0
        for i, char in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                return rest[: i + 1]
        return rest
    array = _ARRAY.match(rest)
    return array.group(0) if array else rest.split(" ", 1)[0]


def _tuple_elements(shape: str) -> list[str] | None:
    """A tuple shape's elements (comments such as ``/*index=5*/`` dropped), or None
    for an array."""
    shape = re.sub(r"/\*.*?\*/", "", shape).strip()
    if not shape.startswith("("):
        return None
    parts, depth, start = [], 0, 1
    for i, char in enumerate(shape):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0 and char == ")":
                if shape[start:i].strip():
                    parts.append(shape[start:i].strip())
                break
        elif char == "," and depth == 1:
            parts.append(shape[start:i].strip())
            start = i + 1
    return parts
