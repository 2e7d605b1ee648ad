"""``jaxplay serve``: the page, the API and a local pool of sandboxed workers.

Registered on the ``jaxplay`` typer app by ``register(app)``; also runs alone as
``python -m backend.cli.serve``. Flags override ``JAXPLAY_*`` settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from backend.app.core.settings_table import flag_help
from backend.cli.common import LogFormatFlag, LogLevelFlag, PoolFlag, SetFlag, UnsafeNoJailFlag


def serve(
    host: Annotated[str | None, typer.Option(help=flag_help("host"))] = None,
    port: Annotated[int | None, typer.Option(help=flag_help("port"))] = None,
    pool: PoolFlag = None,
    database_url: Annotated[str | None, typer.Option(help=flag_help("database_url"))] = None,
    frontend_dist: Annotated[Path | None, typer.Option(help=flag_help("frontend_dist"))] = None,
    unsafe_no_jail: UnsafeNoJailFlag = None,
    log_level: LogLevelFlag = None,
    log_format: LogFormatFlag = None,
    set_: SetFlag = None,
) -> None:
    """Serve the playground page and the API (SPEC §3) with a local worker pool."""
    import uvicorn

    from backend.app.factory import create_app
    from backend.app.relay.pools import PoolConfigError, make_pool
    from backend.cli.common import refuse, start

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
    settings = start("serve", overrides, set_)
    try:
        pool_name, the_pool = make_pool(settings)  # refuse a bad pool before binding the port
    except PoolConfigError as exc:
        refuse("serve", exc)
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
