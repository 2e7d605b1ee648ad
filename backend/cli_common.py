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


def settings_problems(
    exc: ValidationError, flags: dict[str, Any], spelled: dict[str, str] | None = None
) -> str:
    """Each bad setting named as the user wrote it: ``--port 'x' (port)`` (``spelled``:
    setting -> its flag, where that is not ``--`` and the name) or ``JAXPLAY_PORT='x'``,
    then what is wrong with it."""
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
        else:
            where = f"JAXPLAY_{name.upper()}={e['input']!r}"
        problems.append(f"{where}: {message}")
    return "; ".join(problems)


def settings_from_flags(
    command: str, overrides: dict[str, Any], spelled: dict[str, str] | None = None
) -> Settings:
    """The program's settings, read once at start-up: ``JAXPLAY_*`` with the flags
    that were given on top (``spelled``: setting -> its flag where they differ); bad
    ones end the command with exit status 2 and the reason."""
    from backend.app.settings import Settings

    flags = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**flags)
    except ValidationError as exc:
        typer.echo(
            f"jaxplay {command}: bad settings: {settings_problems(exc, flags, spelled)}", err=True
        )
        raise typer.Exit(2)
