"""The jaxplay server: ``create_app(settings)`` (see factory.py). Never imports JAX.

The names are loaded when first used, not with the package: the command line reads
``backend.app.core.settings`` for every command, and the server's framework (FastAPI and
the routes, ~1.5 s of imports) is needed only by ``serve`` and ``worker``.

Its packages, top to bottom (pyproject.toml's ``app-layers``; docs/server.md, "The
house"): the factory; routes; services | outside; relay | web; trust; tenancy |
storage; core. Each package's docstring says what it owns and may import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backend.app.core.settings import Settings
    from backend.app.factory import create_app

__all__ = ["Settings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from backend.app.factory import create_app

        return create_app
    if name == "Settings":
        from backend.app.core.settings import Settings

        return Settings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
