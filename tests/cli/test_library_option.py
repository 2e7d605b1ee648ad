"""`jaxplay run --library NAME=VERSION`: the request's `libraries`, and a version the
local pool does not offer refused before any jail starts (exit 2, the offer named)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from backend.cli import main as cli
from backend.cli import run as run_cli
from sandbox.environments import libraries, library_choices
from sandbox.environments.versions import default_version


def test_library_options_become_the_request_s_libraries() -> None:
    assert run_cli._parse_libraries(None) is None
    assert run_cli._parse_libraries(["optax=0.2.6", "chex = 0.1.90"]) == {
        "optax": "0.2.6",
        "chex": "0.1.90",
    }
    for bad in ("optax", "=0.2.6", "optax="):
        with pytest.raises(typer.Exit):
            run_cli._parse_libraries([bad])


def test_a_version_not_offered_is_refused_naming_the_offer(tmp_path: Path) -> None:
    version = default_version()
    assert version is not None
    code = tmp_path / "f.py"
    code.write_text("def f(x):\n    return x\n")
    out = CliRunner().invoke(cli.app, ["run", str(code), "--library", "optax=0.0.1"])
    assert out.exit_code == run_cli.EXIT_BAD_REQUEST, out.output
    default = libraries.offered(version)["optax"]
    assert (
        f"optax 0.0.1 is not offered with jax {version}; it offers optax {default} (default)"
        in (out.output)
    )
    installed = [
        alt.version
        for alt in library_choices.listed(version)
        if alt.name == "optax" and library_choices.is_installed(version, alt)
    ]
    assert set(installed) <= set(out.output.split())
