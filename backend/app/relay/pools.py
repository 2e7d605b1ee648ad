"""The server's pool, built from its settings through the sandbox's one registry
(sandbox/assembly/pool_registry.py): ``jaxplay serve``, ``run`` and ``worker`` all come here.

The settings name the kind (``pool``, or ``redis`` when ``queue_url`` is set); this
module fills that kind's options from them, refuses an unknown name, and refuses a
pool without the jail unless ``unsafe_no_jail`` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from backend.app.core.logs import fields, get_logger
from backend.app.core.settings import Settings
from sandbox.assembly import pool_registry
from sandbox.assembly.pool_registry import (
    AutoOptions,
    CustomOptions,
    FakeOptions,
    PoolConfigError,
    PoolKind,
    RedisOptions,
    SubprocessOptions,
    ZygoteOptions,
)
from sandbox.pool.base import Pool

if TYPE_CHECKING:
    from sandbox.queue.devices import DeviceSetup

__all__ = ["PoolConfigError", "make_pool", "pool_spec", "with_versions"]

log = get_logger("pool")


def pool_spec(settings: Settings) -> tuple[str, PoolKind[Any]]:
    """(name, kind) of the configured pool. Refuses an unknown name, and a pool
    without the jail unless ``unsafe_no_jail`` says so."""
    name = settings.pool
    if settings.queue_url and name in ("auto", "redis"):
        name = "redis"
    elif settings.queue_url:
        raise PoolConfigError(
            f"pool {name!r} and queue_url both set: with a queue_url the pool is `redis` "
            "(the workers choose their own local pool)"
        )
    elif name == "redis":
        raise PoolConfigError("pool 'redis' needs queue_url (JAXPLAY_QUEUE_URL=redis://...)")
    chosen = pool_registry.kind(name)
    if not chosen.jailed and not settings.unsafe_no_jail:
        raise PoolConfigError(
            f"pool {name!r} runs user code without the jail; refusing. For local development "
            "only, set JAXPLAY_UNSAFE_NO_JAIL=1 (jaxplay serve --unsafe-no-jail)."
        )
    return name, chosen


def _redis(settings: Settings, device: DeviceSetup | None) -> RedisOptions:
    return RedisOptions(
        url=settings.queue_url or "",
        prefix=settings.queue_prefix,
        max_queue=settings.max_queue,
        queue_timeout_s=settings.queue_timeout_s,
        grace_s=settings.run_grace_s,
        dead_after_s=settings.worker_dead_after_s,
        events_ttl_s=settings.events_ttl_s,
    )


#: kind -> its options, from the server's settings (a module:factory: CustomOptions)
OPTIONS: dict[str, Callable[[Settings, DeviceSetup | None], Any]] = {
    "auto": lambda s, device: AutoOptions(
        device=device,
        limits=s.sandbox.limits,
        jail=s.sandbox.jail,
        pool=s.sandbox.pool,
        unsafe_no_jail=s.unsafe_no_jail,
    ),
    "zygote": lambda s, device: ZygoteOptions(
        device=device, limits=s.sandbox.limits, jail=s.sandbox.jail, pool=s.sandbox.pool
    ),
    "subprocess": lambda s, device: SubprocessOptions(max_concurrent=s.pool_capacity),
    "fake": lambda s, device: FakeOptions(max_concurrent=s.pool_capacity),
    "redis": _redis,
}


def pool_options(settings: Settings, name: str, device: DeviceSetup | None = None) -> Any:
    """The options of the kind ``name``, from ``settings`` (``pool_options`` on top)."""
    extra = dict(settings.pool_options)
    if name not in OPTIONS:
        return CustomOptions(max_concurrent=settings.pool_capacity, extra=extra)
    return pool_registry.with_fields(OPTIONS[name](settings, device), extra)


def make_pool(settings: Settings, *, device: DeviceSetup | None = None) -> tuple[str, Pool]:
    """The pool the settings name, constructed but not started; ``device``: the jails'
    devices of a worker's local pool (sandbox/queue/devices.py)."""
    name, chosen = pool_spec(settings)
    if not chosen.jailed:
        log.warning(
            "UNSAFE: user code runs without the jail, with this server's rights",
            extra=fields(pool=name),
        )
    options = pool_options(settings, name, device)
    try:
        pool = pool_registry.build(name, options)
    except PoolConfigError:
        raise
    except TypeError as exc:
        raise PoolConfigError(f"pool {name!r}: bad pool_options: {exc}") from exc
    except Exception as exc:  # e.g. the jail is unavailable
        raise PoolConfigError(f"pool {name!r}: {exc}") from exc
    if name == "auto":
        name = str(pool.stats().get("kind", "auto"))
    # remote workers pick versions in their own local pools; other JAX versions'
    # environments hold CPU wheels, so a GPU/TPU worker runs only its own
    if name != "redis" and (device is None or device.backend == "cpu"):
        pool = with_versions(settings, pool)
    return name, pool


def with_versions(settings: Settings, pool: Pool) -> Pool:
    """The local pool, able to run every installed JAX version (a pool per version,
    started on demand: sandbox/pool/versioned.py). Unchanged where this environment
    has no JAX (a server-only install), as there is then no default version."""
    from sandbox.environments.versions import default_version, grant_jail_access
    from sandbox.pool.versioned import VersionedPool

    version = default_version()
    if version is None:
        return pool
    jail_user = settings.sandbox.jail.jail_user
    return VersionedPool(
        pool,
        default_version=version,
        versions_dir=settings.jax_versions_dir,
        idle_s=settings.jax_version_idle_s,
        grant=lambda env: grant_jail_access(env, jail_user),
    )
