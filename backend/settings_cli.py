"""``jaxplay settings``: every setting, its value here and where that came from.

    jaxplay settings [--set NAME=VALUE ...] [--json]

The values are the ones ``jaxplay serve`` or ``jaxplay worker`` would read in this
environment (``JAXPLAY_*``); ``--set`` tries a value as a flag would give it. Each
is shown as it would be written in the environment, secrets (the session key, API
tokens, a password in a URL) hidden. Registered on the ``jaxplay`` typer app by
``register(app)``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer


def _flag_values(pairs: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` (NAME as the setting or its variable) -> setting name -> value,
    lists and objects given as JSON."""
    from backend.app.settings import declarations

    kinds = {info.name: info.kind for info in declarations()}
    values: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip().lower().removeprefix("jaxplay_")
        if not sep or name not in kinds:
            typer.echo(f"jaxplay settings: --set {pair!r}: not NAME=VALUE of a setting", err=True)
            raise typer.Exit(2)
        if kinds[name].startswith(("list", "dict")):
            try:
                values[name] = json.loads(raw)
            except ValueError as exc:
                typer.echo(f"jaxplay settings: --set {pair!r}: not JSON: {exc}", err=True)
                raise typer.Exit(2)
        else:
            values[name] = raw
    return values


def settings(
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="NAME=VALUE: a setting given as a flag would give it."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per setting, one per line.")
    ] = False,
) -> None:
    """Print every setting with its value and its source (default, environment, flag)."""
    from backend.app.settings import declarations, setting_sources, setting_values, show_value
    from backend.cli_common import settings_from_flags

    flags = _flag_values(set_ or [])
    values = setting_values(settings_from_flags("settings", flags))
    sources = setting_sources(flags)
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
