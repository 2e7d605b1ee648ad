"""The pool registry: a config key names the implementation; an unknown key stops start-up.

Pools are imported only when chosen, so the server never loads what it does not use
(and never JAX: no pool imports it in the server's process).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable
from typing import Any

from backend.app.logs import fields, get_logger
from backend.app.settings import Settings
from sandbox.pool.base import Pool

log = get_logger("pool")

#: name -> (module:factory, whether user code runs jailed)
REGISTRY: dict[str, tuple[str, bool]] = {
    "zygote": ("sandbox.pool.zygote_pool:ZygotePool", True),
    "subprocess": ("sandbox.pool.subprocess_pool:SubprocessPool", False),
    "fake": ("sandbox.pool.fake:FakePool", True),  # runs no code at all
    # remote `jaxplay worker` machines, each running the jailed pool (needs queue_url)
    "redis": ("sandbox.pool.redis_pool:RedisPool", True),
}
#: ``auto``: the sandbox's own choice (the jail, or refusal without one unless
#: JAXPLAY_UNSAFE_NO_JAIL), when the sandbox has one
AUTO = "sandbox.pool:make_pool"


class PoolConfigError(Exception):
    pass


def _load(spec: str) -> Callable[..., Any]:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
        factory = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise PoolConfigError(f"pool {spec!r} cannot be loaded: {exc}") from exc
    if not callable(factory):
        raise PoolConfigError(f"pool {spec!r} is not callable")
    return factory


def _has(spec: str) -> bool:
    module_name, _, attr = spec.partition(":")
    try:
        return hasattr(importlib.import_module(module_name), attr)
    except ImportError:
        return False


def pool_spec(settings: Settings) -> tuple[str, str, bool]:
    """(name, module:factory, jailed) of the configured pool. Refuses an unknown
    name, and a pool without the jail unless ``unsafe_no_jail`` says so."""
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
    if name == "auto":
        if _has(AUTO):
            return "auto", AUTO, True  # the sandbox refuses or warns by itself
        name = "zygote" if importlib.util.find_spec("sandbox.pool.zygote_pool") else "subprocess"
    if name in REGISTRY:
        spec, jailed = REGISTRY[name]
    elif ":" in name:
        spec, jailed = name, False
    else:
        raise PoolConfigError(
            f"pool: unknown {name!r}; choose one of {', '.join(['auto', *REGISTRY])} or module:factory"
        )
    if not jailed and not settings.unsafe_no_jail:
        raise PoolConfigError(
            f"pool {name!r} runs user code without the jail; refusing. For local development "
            "only, set JAXPLAY_UNSAFE_NO_JAIL=1 (jaxplay serve --unsafe-no-jail)."
        )
    return name, spec, jailed


def redis_options(settings: Settings) -> dict[str, Any]:
    """The Redis pool's arguments, from the server's settings."""
    return {
        "url": settings.queue_url,
        "prefix": settings.queue_prefix,
        "max_queue": settings.max_queue,
        "queue_timeout_s": settings.queue_timeout_s,
        "grace_s": settings.run_grace_s,
        "dead_after_s": settings.worker_dead_after_s,
        "events_ttl_s": settings.events_ttl_s,
    }


def make_pool(settings: Settings) -> tuple[str, Pool]:
    """The pool the settings name, constructed but not started."""
    name, spec, jailed = pool_spec(settings)
    if not jailed:
        log.warning(
            "UNSAFE: user code runs without the jail, with this server's rights",
            extra=fields(pool=name),
        )
    factory = _load(spec)
    options: dict[str, Any] = dict(settings.pool_options)
    try:
        params = dict(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        params = {}
    if "max_concurrent" in params:
        options.setdefault("max_concurrent", settings.pool_capacity)
    if "unsafe_no_jail" in params:
        options.setdefault("unsafe_no_jail", settings.unsafe_no_jail)
    if name == "redis":
        for key, value in redis_options(settings).items():
            options.setdefault(key, value)
    try:
        pool = factory(**options)
    except TypeError as exc:
        raise PoolConfigError(f"pool {name!r}: bad pool_options: {exc}") from exc
    except Exception as exc:  # e.g. the jail is unavailable
        raise PoolConfigError(f"pool {name!r}: {exc}") from exc
    if name == "auto":
        name = str(pool.stats().get("kind", "auto"))
    if name != "redis":  # remote workers pick versions in their own local pools
        pool = with_versions(settings, pool)
    return name, pool


def with_versions(settings: Settings, pool: Pool) -> Pool:
    """The local pool, able to run every installed JAX version (a pool per version,
    started on demand: sandbox/pool/versioned.py). Unchanged where this environment
    has no JAX (a server-only install), as there is then no default version."""
    from sandbox.jail.settings import JailConfig
    from sandbox.pool.versioned import VersionedPool
    from sandbox.versions import default_version, grant_jail_access

    version = default_version()
    if version is None:
        return pool
    jail_user = JailConfig.from_env().jail_user
    return VersionedPool(
        pool,
        default_version=version,
        versions_dir=settings.jax_versions_dir,
        idle_s=settings.jax_version_idle_s,
        grant=lambda env: grant_jail_access(env, jail_user),
    )
