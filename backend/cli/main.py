"""The ``jaxplay`` command line (SPEC §4): the typer app and its commands.

``jaxplay run`` is built alone when it is the command asked for: the other commands'
modules read the server's settings for their flags' help (pydantic-settings and every
setting's declaration, a fifth of a second), which a ``run --server`` sending one
request to a server must not pay. ``app`` (every command) is built when first asked for.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

import typer

HELP = "jaxplay: see what JAX's transformations make of your function."


def _commands() -> None:
    """jaxplay: see what JAX's transformations make of your function."""


def build(only_run: bool = False) -> typer.Typer:
    """The ``jaxplay`` app: every command, or only ``run``."""
    from backend.cli import run as run_cli

    app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=False)
    app.callback()(_commands)
    run_cli.register(app)
    if not only_run:
        from backend.cli import mcp_proxy as mcp_cli
        from backend.cli import serve as serve_cli
        from backend.cli import show_settings as settings_cli
        from backend.cli import versions as versions_cli
        from backend.cli import worker as worker_cli

        serve_cli.register(app)
        mcp_cli.register(app)
        worker_cli.register(app)
        versions_cli.register(app)
        settings_cli.register(app)
    return app


@cache
def _whole() -> typer.Typer:
    return build()


def __getattr__(name: str) -> Any:
    if name == "app":
        return _whole()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        build(only_run=True)()
    else:
        _whole()()


if __name__ == "__main__":
    main()
