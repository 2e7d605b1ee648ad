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


def settings_from_flags(command: str, overrides: dict[str, Any]) -> Settings:
    """The settings: ``JAXPLAY_*`` with the flags that were given on top; bad ones end
    the command with exit status 2 and the reason."""
    from backend.app.settings import Settings

    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        typer.echo(
            f"jaxplay {command}: bad settings: {validation_problems(exc, 'settings')}", err=True
        )
        raise typer.Exit(2)
