"""Source mapping: which line of the user's code made each output line.

- jaxpr: JAX's pretty printer reports, per printed line, the traceback of the
  equation printed there (``pretty_print(source_map=...)``).
- StableHLO: the same module printed with ``debug_info=True`` carries MLIR
  locations (``#locN = loc(...)``, ``callsite(A at B)``, name locations); that text is
  aligned line by line with the plain text the user sees.
- HLO: instruction metadata names ``source_file``/``source_line``, or a
  ``stack_frame_id`` into the module's ``StackFrames`` tables.

In each case the innermost frame in the user's own file wins: where JAX points into
a library, the line of user code that called it is the one that matters. When any
step does not line up, the mapping is left empty rather than guessed.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from sandbox.engine.core.compat import first_line_in
from sandbox.protocol.requests import SNIPPET_FILENAME

Source = dict[str, int]


# --- jaxpr -------------------------------------------------------------------------

_EQN_HEAD = re.compile(r"^\s*\S+:\S+(?:\s+\S+:\S+)*\s+=\s+\S")


def snippet_line(traceback: Any) -> int | None:
    """The innermost frame of a JAX traceback that lies in the user's code."""
    if traceback is None:
        return None
    return first_line_in(traceback, SNIPPET_FILENAME)


Spans = list[list[tuple[int, int, Any]]]


def jaxpr_sources(jaxpr: Any, text: str) -> list[Source]:
    """``{eqn, line, out_line}`` for every printed line that an equation made."""
    spans: Spans = []
    try:
        printed = jaxpr.pretty_print(source_map=spans)
    except TypeError:  # a JAX without source maps in its pretty printer
        return []
    if printed != text:
        return []
    return spans_sources(spans, text)


def printed_jaxpr(jaxpr: Any) -> tuple[str, Spans | None]:
    """``str(jaxpr)`` and the spans of each of its printed lines (None where this JAX
    has no source maps), printed once: on every offered JAX ``str`` of a (closed)
    jaxpr is its ``pretty_print()``, and ``source_map=`` only collects the spans as
    the text is made. ``spans_sources`` maps them."""
    spans: Spans = []
    try:
        return jaxpr.pretty_print(source_map=spans), spans
    except Exception as exc:  # no source maps (TypeError), or their printing failed
        if not isinstance(exc, TypeError):
            print(
                f"jaxplay: source mapping failed: {type(exc).__name__}: {exc}", file=sys.__stderr__
            )
        return str(jaxpr), None


def spans_sources(spans: Spans | None, text: str) -> list[Source]:
    """``jaxpr_sources`` of a text printed with ``spans`` (``printed_jaxpr``)."""
    lines = text.split("\n")
    if spans is None or len(spans) != len(lines):
        return []
    sources: list[Source] = []
    eqn, previous = -1, None
    for index, (line_text, line_spans) in enumerate(zip(lines, spans, strict=True)):
        tracebacks = [tb for _, _, tb in line_spans if tb is not None]
        if not tracebacks:
            previous = None
            continue
        traceback = tracebacks[0]
        if _EQN_HEAD.match(line_text) or traceback is not previous:
            eqn += 1
        previous = traceback
        # The line's first span may be an outer equation's whose frames are not the
        # user's (a jit's call, printed with its inner jaxpr inline on this line): the
        # line comes from the first span that points into the user's code.
        line = next((n for tb in tracebacks if (n := snippet_line(tb)) is not None), None)
        if line is not None:
            sources.append({"eqn": eqn, "line": line, "out_line": index + 1})
    return sources


# --- MLIR (StableHLO) ----------------------------------------------------------------

_LOC_DEF = re.compile(r"^#(loc\d*) = loc\((.*)\)$")
_FILE_LOC = re.compile(r'^"((?:[^"\\]|\\.)*)":(\d+):\d+')


_LAST_LOC_REF = re.compile(r" loc\((#loc\d*)\)$")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
#: what makes ``_split_top`` count depth; text with none of it splits at ``sep``
_NESTING = frozenset('"()[]<>')


def _split_locs(line: str) -> tuple[str, list[str]]:
    """Remove every `` loc(...)`` from a line; return the rest and the loc bodies."""
    first = line.find(" loc(")
    if first < 0:
        return line, []
    last = _LAST_LOC_REF.search(line, first)
    if last is not None and last.start() == first:  # most ops: one `` loc(#locN)`` at the end
        return line[:first], [last.group(1)]
    out, bodies, i = [], [], 0
    while True:
        start = line.find(" loc(", i)
        if start < 0:
            out.append(line[i:])
            break
        out.append(line[i:start])
        j, depth, in_string = start + 5, 1, False
        while j < len(line) and depth:
            ch = line[j]
            if in_string:
                if ch == "\\":
                    j += 1
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            j += 1
        bodies.append(line[start + 5 : j - 1])
        i = j
    return "".join(out), bodies


class _LocResolver:
    def __init__(self, definitions: dict[str, str]) -> None:
        self._defs = definitions
        self._memo: dict[str, list[tuple[str, int]]] = {}

    def frames(self, body: str, depth: int = 0) -> list[tuple[str, int]]:
        """The (file, line) frames of a location, innermost first."""
        body = body.strip()
        if depth > 64 or not body:
            return []
        if body.startswith("#loc"):
            name = body[1:]
            if name not in self._memo:
                self._memo[name] = []  # guards against cycles
                self._memo[name] = self.frames(self._defs.get(name, ""), depth + 1)
            return self._memo[name]
        if body.startswith("callsite(") and body.endswith(")"):
            inner = body[len("callsite(") : -1]
            callee, _, caller = _split_top(inner, " at ")
            return self.frames(callee, depth + 1) + self.frames(caller, depth + 1)
        if body.startswith("fused[") or body.startswith("fused<"):
            start = body.find("[")
            end = body.rfind("]")
            frames: list[tuple[str, int]] = []
            for part in _split_all(body[start + 1 : end], ", "):
                frames += self.frames(part, depth + 1)
            return frames
        match = _FILE_LOC.match(body)
        if match:
            return [(match.group(1), int(match.group(2)))]
        if body.startswith('"'):  # a name location: "name"(child) or just "name"
            end = _string_end(body)
            rest = body[end:]
            if rest.startswith("(") and rest.endswith(")"):
                return self.frames(rest[1:-1], depth + 1)
        return []


def _string_end(text: str) -> int:
    """Where the string literal that ``text`` starts with ends (past its quote);
    the text's end when it is not closed."""
    match = _STRING.match(text)
    return match.end() if match else len(text)


def _split_all(text: str, sep: str) -> list[str]:
    parts = []
    while True:
        head, found, text = _split_top(text, sep)
        parts.append(head)
        if not found:
            return parts


def _split_top(text: str, sep: str) -> tuple[str, bool, str]:
    """Split at the first ``sep`` outside parentheses, brackets and strings."""
    if _NESTING.isdisjoint(text):  # e.g. ``#loc3 at #loc4``: nothing to count
        head, found, tail = text.partition(sep)
        return head, bool(found), tail
    depth, i, in_string = 0, 0, False
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            return text[:i], True, text[i + len(sep) :]
        i += 1
    return text, False, ""


def _first_snippet_line(frames: list[tuple[str, int]]) -> int | None:
    for file, line in frames:
        if file == SNIPPET_FILENAME:
            return line
    return None


def mlir_sources(plain: str, debug: str) -> list[Source]:
    """``{out_line, line}`` for each line of ``plain`` whose op has a user location."""
    definitions: dict[str, str] = {}
    body_lines = []
    for line in debug.split("\n"):
        match = _LOC_DEF.match(line)
        if match:
            definitions[match.group(1)] = match.group(2)
        else:
            body_lines.append(line)
    plain_lines = plain.split("\n")
    if len(body_lines) != len(plain_lines):
        return []
    resolver = _LocResolver(definitions)
    sources: list[Source] = []
    for index, (shown, annotated) in enumerate(zip(plain_lines, body_lines, strict=True)):
        stripped, bodies = _split_locs(annotated)
        if stripped.rstrip() != shown.rstrip():
            return []  # the two printings do not line up: map nothing rather than guess
        if not bodies:
            continue
        user_line = _first_snippet_line(resolver.frames(bodies[-1]))
        if user_line is not None:
            sources.append({"out_line": index + 1, "line": user_line})
    return sources


# --- HLO ---------------------------------------------------------------------------

_TABLE_ROW = re.compile(r"^(\d+) (.*)$")
_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s}]+)')
_SOURCE_META = re.compile(r'source_file="((?:[^"\\]|\\.)*)" source_line=(\d+)')
_FRAME_META = re.compile(r"stack_frame_id=(\d+)")


def _hlo_tables(text: str) -> dict[str, dict[int, Any]]:
    tables: dict[str, dict[int, Any]] = {}
    current: dict[int, Any] | None = None
    for line in text.split("\n"):
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = tables.setdefault(line, {})
            continue
        if current is None:
            continue
        match = _TABLE_ROW.match(line)
        if not match:
            current = None
            continue
        value = match.group(2)
        if value.startswith('"'):
            current[int(match.group(1))] = value[1:-1]
        else:
            current[int(match.group(1))] = {k: v.strip('"') for k, v in _FIELD.findall(value)}
    return tables


def _frame_line(tables: dict[str, dict[int, Any]], frame_id: int) -> int | None:
    frames, locations = tables.get("StackFrames", {}), tables.get("FileLocations", {})
    files = tables.get("FileNames", {})
    seen = set()
    while frame_id in frames and frame_id not in seen:
        seen.add(frame_id)
        frame = frames[frame_id]
        location = locations.get(int(frame.get("file_location_id", -1)))
        if location and files.get(int(location.get("file_name_id", -1))) == SNIPPET_FILENAME:
            return int(location["line"])
        # XLA prints a frame's parent as its id plus one; 0 means no parent
        frame_id = int(frame.get("parent_frame_id", 0)) - 1
    return None


def hlo_instruction_line(module: str, instruction: str) -> int | None:
    """The user's line of one HLO instruction's text (one XLA logged, say), its
    ``stack_frame_id`` resolved against the tables of the module it came from."""
    match = _SOURCE_META.search(instruction)
    if match:
        return int(match.group(2)) if match.group(1) == SNIPPET_FILENAME else None
    if frame := _FRAME_META.search(instruction):
        return _frame_line(_hlo_tables(module), int(frame.group(1)))
    return None


def hlo_sources(text: str) -> list[Source]:
    tables = _hlo_tables(text)
    sources: list[Source] = []
    for index, line in enumerate(text.split("\n")):
        if "metadata={" not in line:
            continue
        match = _SOURCE_META.search(line)
        user_line: int | None = None
        if match and match.group(1) == SNIPPET_FILENAME:
            user_line = int(match.group(2))
        elif frame := _FRAME_META.search(line):
            user_line = _frame_line(tables, int(frame.group(1)))
        if user_line is not None:
            sources.append({"out_line": index + 1, "line": user_line})
    return sources
