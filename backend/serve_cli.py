"""``jaxplay serve``: the page, the API and a local pool of sandboxed workers.

Registered on the ``jaxplay`` typer app by ``register(app)``; also runs alone as
``python -m backend.serve_cli``. Flags override ``JAXPLAY_*`` settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer


def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to bind (JAXPLAY_HOST; default 127.0.0.1).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port (JAXPLAY_PORT; default 8000).")] = None,
    pool: Annotated[
        str | None,
        typer.Option(help="zygote, subprocess, fake, auto or module:factory (JAXPLAY_POOL)."),
    ] = None,
    database_url: Annotated[
        str | None,
        typer.Option(help="sqlite:///PATH for snippets and cached results (JAXPLAY_DATABASE_URL)."),
    ] = None,
    frontend_dist: Annotated[
        Path | None, typer.Option(help="The built page to serve (JAXPLAY_FRONTEND_DIST).")
    ] = None,
    unsafe_no_jail: Annotated[
        bool | None,
        typer.Option(
            "--unsafe-no-jail",
            help="Allow running user code without the jail (local development only).",
        ),
    ] = None,
    log_level: Annotated[str | None, typer.Option(help="debug, info, warning or error.")] = None,
    log_format: Annotated[str | None, typer.Option(help="json or text.")] = None,
) -> None:
    """Serve the playground page and the API (SPEC §3) with a local worker pool."""
    import uvicorn

    from backend.app.factory import create_app
    from backend.app.logs import configure_logging
    from backend.app.pools import PoolConfigError, make_pool
    from backend.cli_common import settings_from_flags

    overrides: dict[str, Any] = {
        "host": host,
        "port": port,
        "pool": pool,
        "database_url": database_url,
        "frontend_dist": frontend_dist,
        "unsafe_no_jail": unsafe_no_jail,
        "log_level": log_level,
        "log_format": log_format,
    }
    settings = settings_from_flags("serve", overrides)
    configure_logging(settings.log_level, settings.log_format)
    try:
        pool_name, the_pool = make_pool(settings)  # refuse a bad pool before binding the port
    except PoolConfigError as exc:
        typer.echo(f"jaxplay serve: {exc}", err=True)
        raise typer.Exit(2)
    uvicorn.run(
        create_app(settings, pool=the_pool, pool_name=pool_name),
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        # The stock asyncio loop: the jail starts workers with
        # create_subprocess_exec(user=..., group=...), which uvloop does not support.
        loop="asyncio",
        ws_max_size=settings.max_body_bytes,
        # X-Forwarded-For is believed only from JAXPLAY_TRUSTED_PROXIES, by the app itself
        # (uvicorn's default would believe it from 127.0.0.1, or FORWARDED_ALLOW_IPS).
        proxy_headers=False,
        timeout_graceful_shutdown=int(settings.cancel_grace_s) + 3,
    )


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``jaxplay`` command line."""
    app.command()(serve)


if __name__ == "__main__":
    typer.run(serve)
