"""A Jupyter notebook (``.ipynb``) turned into a run request's code: its code cells
joined in order, the lines IPython would not run as Python (shell ``!``, line magics
``%``, help ``?``, cell magics ``%%``) dropped and listed, the entry the last top-level
function. Read and validated by ``nbformat`` (the format's own schema); nothing in the
notebook runs here.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any

import nbformat

#: cell magics whose body is Python: the magic line goes, the body stays
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "pypy"})


class NotANotebook(ValueError):
    """The file is not a notebook jaxplay can read; the message says why."""


@dataclass(frozen=True)
class Dropped:
    cell: int  # the code cell's place in the notebook, from 0 (all cells counted)
    line: int  # the line's number in its cell, from 1
    text: str
    why: str


@dataclass
class ImportedCode:
    code: str
    entry: str
    code_cells: int
    dropped: list[Dropped] = field(default_factory=list)


def _kept_lines(index: int, source: str, dropped: list[Dropped]) -> list[str]:
    lines = source.splitlines()
    first = lines[0].strip() if lines else ""
    if first.startswith("%%"):
        magic = first[2:].split()[0] if first[2:].split() else ""
        if magic not in PYTHON_CELL_MAGICS:  # %%bash, %%writefile...: not Python at all
            dropped.extend(
                Dropped(index, n, text, f"the cell is %%{magic}, not Python")
                for n, text in enumerate(lines, start=1)
            )
            return []
        dropped.append(Dropped(index, 1, lines[0], "cell magic"))
        lines, start = lines[1:], 2
    else:
        start = 1
    kept = []
    for n, text in enumerate(lines, start=start):
        stripped = text.strip()
        if stripped.startswith("!"):
            dropped.append(Dropped(index, n, text, "shell command"))
        elif stripped.startswith("%"):
            dropped.append(Dropped(index, n, text, "line magic"))
        elif stripped.endswith("?") and not stripped.startswith("#") and stripped[:-1].strip():
            dropped.append(Dropped(index, n, text, "help (?)"))
        else:
            kept.append(text)
    return kept


def _read(data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotANotebook(f"not UTF-8 text (byte {exc.start}): an .ipynb file is JSON") from None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise NotANotebook(f"not JSON ({exc}): an .ipynb file is JSON") from None
    if not isinstance(raw, dict) or "cells" not in raw or "nbformat" not in raw:
        raise NotANotebook("JSON, but not a notebook: it has no `nbformat` and `cells`")
    try:
        notebook = nbformat.reads(text, as_version=4)
        nbformat.validate(notebook)
    except Exception as exc:  # nbformat's ValidationError, its reader's errors
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NotANotebook(f"not a valid notebook (nbformat): {message[:300]}") from None
    language = notebook.get("metadata", {}).get("kernelspec", {}).get("language", "python")
    if str(language).lower() != "python":
        raise NotANotebook(f"a {language} notebook: jaxplay runs Python")
    return notebook


def import_notebook(data: bytes) -> ImportedCode:
    """The notebook's Python; ``NotANotebook`` for anything else, or for a notebook whose
    code does not parse or defines no top-level function (nothing to transform)."""
    notebook = _read(data)
    dropped: list[Dropped] = []
    parts: list[str] = []
    code_cells = 0
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        code_cells += 1
        kept = "\n".join(_kept_lines(index, cell.source, dropped)).strip("\n")
        if kept.strip():
            parts.append(kept)
    code = "\n\n".join(parts) + "\n" if parts else ""
    if not code_cells:
        raise NotANotebook("the notebook has no code cells")
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise NotANotebook(
            f"its code cells, joined, do not parse as Python: line {exc.lineno}: {exc.msg}"
        ) from None
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    if not functions:
        raise NotANotebook("its code defines no top-level function (`def f(...)`) to transform")
    return ImportedCode(code=code, entry=functions[-1], code_cells=code_cells, dropped=dropped)
