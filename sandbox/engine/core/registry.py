"""The outputs the engine makes, found by name: ``sandbox.engine.outputs.NAME`` for
each NAME of ``sandbox.protocol.OUTPUT_TABLE``, holding its row as ``OUTPUT``.

The core imports no output module itself (the import contracts in pyproject.toml
hold it to that): a run loads the rows of the outputs its request names, when it
starts, so that an output nobody asked for costs nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from sandbox.engine.core.output import Needs, Output
from sandbox.protocol.output_table import OUTPUT_TABLE

PACKAGE = "sandbox.engine.outputs"
#: every output, in the table's order
NAMES: tuple[str, ...] = tuple(OUTPUT_TABLE)


def row(name: str) -> Output:
    """The row of the output ``name`` (its module imported on first use)."""
    if name not in OUTPUT_TABLE:
        raise KeyError(f"{name!r} is not an output of OUTPUT_TABLE")
    output = importlib.import_module(f"{PACKAGE}.{name}").OUTPUT
    if not isinstance(output, Output):
        raise TypeError(f"{PACKAGE}.{name}.OUTPUT is not an Output row")
    return output


def rows(names: Iterable[str]) -> list[tuple[str, Output]]:
    """The rows of ``names``, in the table's order."""
    asked = set(names)
    return [(name, row(name)) for name in NAMES if name in asked]


def made_at(outputs: list[tuple[str, Output]], needs: Needs) -> list[tuple[str, Output]]:
    """Those of ``outputs`` made once ``needs`` is done."""
    return [(name, output) for name, output in outputs if output.needs == needs]
