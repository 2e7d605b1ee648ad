"""What the ``jaxplay`` commands share: turning flags and pydantic's complaints into
settings and one-line messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError

if TYPE_CHECKING:
    from backend.app.settings import Settings


def validation_problems(exc: ValidationError, root: str) -> str:
    """``field: message; field: message``; ``root`` names a problem with no field."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or root}: {e['msg']}" for e in exc.errors()
    )


def set_values(command: str, pairs: list[str] | None) -> dict[str, Any]:
    """``--set NAME=VALUE`` flags (NAME the setting or its variable) -> setting name ->
    value, lists and objects given as JSON; a pair that names no setting ends the
    command with exit status 2."""
    import json

    from backend.app.settings import declarations

    kinds = {info.name: info.kind for info in declarations()}
    values: dict[str, Any] = {}
    for pair in pairs or []:
        name, sep, raw = pair.partition("=")
        name = name.strip().lower().removeprefix("jaxplay_")
        if not sep or name not in kinds:
            typer.echo(f"jaxplay {command}: --set {pair!r}: not NAME=VALUE of a setting", err=True)
            raise typer.Exit(2)
        if kinds[name].startswith(("list", "dict")):
            try:
                values[name] = json.loads(raw)
            except ValueError as exc:
                typer.echo(f"jaxplay {command}: --set {pair!r}: not JSON: {exc}", err=True)
                raise typer.Exit(2)
        else:
            values[name] = raw
    return values


#: the help of ``--set``, on every command that reads the settings
SET_HELP = "NAME=VALUE: any setting (jaxplay settings lists them), over JAXPLAY_*; repeatable."


def settings_problems(
    exc: ValidationError,
    flags: dict[str, Any],
    spelled: dict[str, str] | None = None,
    sets: dict[str, Any] | None = None,
) -> str:
    """Each bad setting named as the user wrote it: ``--port 'x' (port)`` (``spelled``:
    setting -> its flag, where that is not ``--`` and the name), ``--set pids='x'``, or
    ``JAXPLAY_PORT='x'``, then what is wrong with it."""
    problems = []
    for e in exc.errors():
        message = e["msg"].removeprefix("Value error, ")
        if not e["loc"]:  # a sandbox setting (its message names it) or two together
            problems.append(message)
            continue
        name = str(e["loc"][0])
        if flags.get(name) is not None:
            flag = (spelled or {}).get(name, f"--{name.replace('_', '-')}")
            where = f"{flag} {flags[name]!r} ({name})"
        elif name in (sets or {}):
            where = f"--set {name}={(sets or {})[name]!r}"
        else:
            where = f"JAXPLAY_{name.upper()}={e['input']!r}"
        problems.append(f"{where}: {message}")
    return "; ".join(problems)


def settings_from_flags(
    command: str,
    overrides: dict[str, Any],
    spelled: dict[str, str] | None = None,
    sets: list[str] | None = None,
) -> Settings:
    """The program's settings, read once at start-up: ``JAXPLAY_*``, then the
    ``--set NAME=VALUE`` flags (``sets``), then the command's own flags (``overrides``,
    None where not given; ``spelled``: setting -> its flag where they differ); bad ones
    end the command with exit status 2 and the reason."""
    from backend.app.settings import Settings

    flags = {k: v for k, v in overrides.items() if v is not None}
    set_flags = set_values(command, sets)
    try:
        return Settings(**{**set_flags, **flags})
    except ValidationError as exc:
        problems = settings_problems(exc, flags, spelled, set_flags)
        typer.echo(f"jaxplay {command}: bad settings: {problems}", err=True)
        raise typer.Exit(2)
