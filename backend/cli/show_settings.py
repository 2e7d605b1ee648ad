"""``jaxplay settings``: every setting, its value here and where that came from.

    jaxplay settings [--set NAME=VALUE ...] [--json]

The values are the ones ``jaxplay serve`` or ``jaxplay worker`` would read in this
environment (``JAXPLAY_*``); ``--set`` gives a value as those commands' ``--set``
would (their named flags, such as ``--port``, are ``--set port=...`` here). Each
is shown as it would be written in the environment, secrets (the session key, API
tokens, a password in a URL) hidden. Registered on the ``jaxplay`` typer app by
``register(app)``.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from backend.cli.common import SET_HELP


def settings(
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help=SET_HELP),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per setting, one per line.")
    ] = False,
) -> None:
    """Print every setting with its value and its source (default, environment, flag)."""
    from backend.app.core.settings_table import (
        declarations,
        setting_sources,
        setting_values,
        show_value,
    )
    from backend.cli.common import set_values, settings_from_flags

    values = setting_values(settings_from_flags("settings", {}, sets=set_))
    sources = setting_sources(set_values("settings", set_))
    rows = [
        (info.variable, show_value(info.name, values[info.name]), sources[info.name])
        for info in declarations()
    ]
    if as_json:
        for variable, value, source in rows:
            typer.echo(json.dumps({"variable": variable, "value": value, "source": source}))
        return
    width = max(len(variable) for variable, _, _ in rows)
    for variable, value, source in rows:
        typer.echo(f"{variable:<{width}}  {source:<11}  {value}")


def register(app: typer.Typer) -> None:
    """Add ``settings`` to the ``jaxplay`` command line."""
    app.command()(settings)


if __name__ == "__main__":
    typer.run(settings)
