"""The engine's outputs as a table: one module of sandbox/engine/outputs/ per output of
OUTPUT_TABLE, each holding its row, found by name (the import contracts in pyproject.toml keep the core from importing
any of them: tests/test_layering.py)."""

from __future__ import annotations

import pkgutil

import pytest

from sandbox.engine import outputs
from sandbox.engine.core import registry
from sandbox.engine.core.output import Output, RunHooks
from sandbox.protocol.output_table import OUTPUT_TABLE


def test_the_outputs_folder_holds_exactly_the_tables_outputs() -> None:
    found = {m.name for m in pkgutil.iter_modules(outputs.__path__)}
    assert found == set(OUTPUT_TABLE), "one module (or package) per OUTPUT_TABLE row"


def test_the_registry_names_every_output_in_the_tables_order() -> None:
    assert tuple(OUTPUT_TABLE) == registry.NAMES
    rows = registry.rows(reversed(OUTPUT_TABLE))
    assert [name for name, _ in rows] == list(OUTPUT_TABLE)
    for name, output in rows:
        assert isinstance(output, Output), name
        assert output.what, name
        assert output.make is not None or output.hooks is not None, name
        assert output.hooks is None or issubclass(output.hooks, RunHooks), name
        # a row made from the compiled program's dump is made after the compile
        assert not output.dumps or output.needs == "compiled", name


def test_a_name_outside_the_table_is_refused() -> None:
    with pytest.raises(KeyError, match="not an output"):
        registry.row("jaxpr_walk")


def test_the_run_names_no_output() -> None:
    """What an output does in the run is in its row (its stage, dumps, trace, hooks):
    core/run.py spells no output's name."""
    import ast
    from pathlib import Path

    from sandbox.engine.core import run

    tree = ast.parse(Path(run.__file__).read_text())
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert strings & set(OUTPUT_TABLE) == set()
