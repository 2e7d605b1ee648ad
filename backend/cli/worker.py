"""``jaxplay worker``: serve one backend's runs from a Redis queue with a local pool.

    jaxplay worker --queue redis://HOST:6379/0 [--backend cpu|gpu|tpu]

It runs the same jailed warm pool as ``jaxplay serve`` (for ``gpu``/``tpu`` with the
device nodes and driver paths the jail needs: ``sandbox.queue.devices``), joins the
backend's consumer group, heartbeats its registration, and on SIGTERM/SIGINT
finishes its runs (``JAXPLAY_WORKER_DRAIN_S``) and leaves. Registered on the
``jaxplay`` typer app by ``register(app)``; also runs alone as
``python -m backend.cli.worker``. Flags override ``JAXPLAY_*`` settings.
This module never imports JAX: the runs do, in their jails.
"""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING, Annotated, Any

import typer

from backend.app.core.settings import Settings
from backend.app.core.settings_table import flag_help
from backend.cli.common import LogFormatFlag, LogLevelFlag, PoolFlag, SetFlag, UnsafeNoJailFlag

if TYPE_CHECKING:
    from sandbox.pool.base import Pool


def worker(
    queue: Annotated[str | None, typer.Option(help=flag_help("queue_url"))] = None,
    backend: Annotated[str | None, typer.Option(help=flag_help("worker_backend"))] = None,
    pool: PoolFlag = None,
    runs: Annotated[int | None, typer.Option(help=flag_help("worker_runs"))] = None,
    devices: Annotated[str | None, typer.Option(help=flag_help("worker_devices"))] = None,
    worker_id: Annotated[str | None, typer.Option("--id", help=flag_help("worker_id"))] = None,
    prefix: Annotated[str | None, typer.Option(help=flag_help("queue_prefix"))] = None,
    unsafe_no_jail: UnsafeNoJailFlag = None,
    log_level: LogLevelFlag = None,
    log_format: LogFormatFlag = None,
    set_: SetFlag = None,
) -> None:
    """Run one backend's jobs from the Redis queue on this machine (SPEC §4)."""
    from backend.app.relay.pools import PoolConfigError
    from backend.cli.common import refuse, start

    overrides: dict[str, Any] = {
        "queue_url": queue,
        "worker_backend": backend,
        "pool": pool,
        "worker_runs": runs,
        "worker_devices": devices,
        "worker_id": worker_id,
        "queue_prefix": prefix,
        "unsafe_no_jail": unsafe_no_jail,
        "log_level": log_level,
        "log_format": log_format,
    }
    settings = start("worker", overrides, set_, FLAGS)
    if not settings.queue_url:
        refuse("worker", "give --queue redis://HOST:6379/0 (or JAXPLAY_QUEUE_URL)")
    _log_sandbox_too(settings.log_level)
    # A jail that cannot start (here, or at the pool's first test jail) ends the
    # worker, naming what the host lacks (sandbox/queue/jail_host.py): never a run
    # without it
    from sandbox.queue.jail_host import refusal

    try:
        local = local_pool(settings)
    except (PoolConfigError, RuntimeError) as exc:
        refuse("worker", refusal(exc))
    try:
        asyncio.run(serve_queue(settings, local))
    except RuntimeError as exc:  # WorkerStartError, a failed pool start
        refuse("worker", refusal(exc), 1)


#: setting -> the flag that gives it, where the two are not spelled alike
FLAGS = {
    "queue_url": "--queue",
    "worker_backend": "--backend",
    "worker_runs": "--runs",
    "worker_devices": "--devices",
    "worker_id": "--id",
    "queue_prefix": "--prefix",
}


def _log_sandbox_too(level: str) -> None:
    """The queue loop and the pool log under ``sandbox``: through the same handler."""
    import logging

    from backend.app.core.logs import LOGGER

    ours, theirs = logging.getLogger(LOGGER), logging.getLogger("sandbox")
    theirs.handlers[:] = ours.handlers
    theirs.setLevel(level.upper())
    theirs.propagate = False


def local_pool(settings: Any) -> Any:
    """The pool this machine runs jobs on: the jailed warm pool set up for the
    backend's devices (``auto``, ``zygote``), or another by name (tests, development),
    built as the server builds its own (backend/app/relay/pools.py)."""
    from backend.app.relay.pools import make_pool
    from sandbox.queue.devices import DeviceError, device_setup

    try:
        setup = device_setup(
            settings.worker_backend,
            visible=settings.worker_devices,
            ro_paths=tuple(settings.worker_driver_paths),
        )
    except DeviceError as exc:
        raise RuntimeError(str(exc)) from None
    _, pool = make_pool(settings.model_copy(update={"queue_url": None}), device=setup)
    return pool


async def serve_queue(settings: Settings, pool: Pool) -> None:
    from sandbox.queue.worker import QueueWorker

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await QueueWorker.from_settings(settings, pool).run(stop)


def register(app: typer.Typer) -> None:
    """Add ``worker`` to the ``jaxplay`` command line."""
    app.command()(worker)


if __name__ == "__main__":
    typer.run(worker)
