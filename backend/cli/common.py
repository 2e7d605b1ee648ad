"""What the ``jaxplay`` commands share: turning flags and pydantic's complaints into
settings and one-line messages, and the start of the commands that run a pool
(``serve``, ``worker``): the flags both take and ``start``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from backend.app.core.settings_table import flag_help

if TYPE_CHECKING:
    from backend.app.core.settings import Settings


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

    from backend.app.core.settings_table import declarations

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

# The flags of every command that runs a pool (``serve``, ``worker``).
PoolFlag = Annotated[str | None, typer.Option(help=flag_help("pool"))]
UnsafeNoJailFlag = Annotated[
    bool | None, typer.Option("--unsafe-no-jail", help=flag_help("unsafe_no_jail"))
]
LogLevelFlag = Annotated[str | None, typer.Option(help=flag_help("log_level"))]
LogFormatFlag = Annotated[str | None, typer.Option(help=flag_help("log_format"))]
SetFlag = Annotated[list[str] | None, typer.Option("--set", help=SET_HELP)]


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
    from backend.app.core.settings import Settings

    flags = {k: v for k, v in overrides.items() if v is not None}
    set_flags = set_values(command, sets)
    try:
        return Settings(**{**set_flags, **flags})
    except ValidationError as exc:
        problems = settings_problems(exc, flags, spelled, set_flags)
        typer.echo(f"jaxplay {command}: bad settings: {problems}", err=True)
        raise typer.Exit(2)


def start(
    command: str,
    overrides: dict[str, Any],
    sets: list[str] | None,
    spelled: dict[str, str] | None = None,
) -> Settings:
    """The start of a command that runs a pool: its settings from the environment,
    ``--set`` and its flags (``settings_from_flags``), and its logs configured by them."""
    from backend.app.core.logs import configure_logging

    settings = settings_from_flags(command, overrides, spelled, sets=sets)
    configure_logging(settings.log_level, settings.log_format)
    return settings


def refuse(command: str, why: object, status: int = 2) -> NoReturn:
    """End ``command`` with ``status`` and one line saying why."""
    typer.echo(f"jaxplay {command}: {why}", err=True)
    raise typer.Exit(status)
