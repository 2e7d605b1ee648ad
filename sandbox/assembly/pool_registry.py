"""The pool registry: the one way to build a pool, by name, from typed options.

Each kind of pool is registered once: its name, the dataclass of its options, the
factory that builds it from them, and whether user code runs in the jail. The fake is
registered like any other. ``jaxplay serve``, ``jaxplay run`` and ``jaxplay worker``
all build their pool here (through backend/app/relay/pools.py, which fills the options
from the server's settings).

====================  ==============================================================
``auto``              the jailed warm pool; without a usable jail, refuse, unless
                      ``unsafe_no_jail``: then, loudly, the unjailed ``subprocess``
``zygote``            the jailed warm pool (sandbox/zygote/), or refuse
``subprocess``        a fresh unjailed process per run (development only)
``redis``             remote ``jaxplay worker`` machines (sandbox/queue/)
``fake``              scripted events, no code run (tests)
``module:factory``    any callable, called with ``max_concurrent`` and ``extra``
====================  ==============================================================

A kind's modules are imported only when it is built, so the server never loads what
it does not use (and never JAX: no pool imports it in the server's process). This
module sits above ``sandbox.pool`` (the interface), ``sandbox.queue`` and
``sandbox.zygote``; none of them imports it.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sandbox.pool.base import Pool

if TYPE_CHECKING:
    from sandbox.jail.settings import JailConfig, JailLimits
    from sandbox.pool.settings import PoolSettings
    from sandbox.queue.devices import DeviceSetup

log = logging.getLogger(__name__)

UNSAFE_WARNING = (
    "UNSAFE: JAXPLAY_UNSAFE_NO_JAIL is set and the jail is unavailable (%s): user code "
    "runs WITHOUT a sandbox, with this process's rights, files, network and secrets. "
    "Development only; never expose this server to anyone."
)


class PoolConfigError(Exception):
    """The named pool does not exist, or its options do not fit it."""


# --- options, one dataclass per kind ------------------------------------------------


@dataclass(frozen=True)
class FakeOptions:
    max_concurrent: int = 4


@dataclass(frozen=True)
class SubprocessOptions:
    max_concurrent: int = 2
    #: the interpreter of the worker (another JAX version's environment); None: ours
    python: str | None = None


@dataclass(frozen=True)
class ZygoteOptions:
    #: device nodes, driver paths and environment for every jail (a GPU/TPU worker's,
    #: sandbox/queue/devices.py); None: the plain CPU jail
    device: DeviceSetup | None = None
    #: the jail's limits and config and the pool's sizes, read at start-up
    #: (sandbox/assembly/settings.py); None: their declared defaults
    limits: JailLimits | None = None
    jail: JailConfig | None = None
    pool: PoolSettings | None = None


@dataclass(frozen=True)
class AutoOptions(ZygoteOptions):
    #: without a usable jail, run user code unjailed (development only) instead of
    #: refusing; never for a device worker
    unsafe_no_jail: bool = False


@dataclass(frozen=True)
class RedisOptions:
    url: str
    prefix: str = "jaxplay"
    max_queue: int = 16
    queue_timeout_s: float = 20.0
    grace_s: float = 5.0
    dead_after_s: float = 10.0
    events_ttl_s: float = 300.0
    refresh_s: float = 1.0
    connect_timeout_s: float = 30.0


@dataclass(frozen=True)
class CustomOptions:
    """A ``module:factory`` pool: called as ``factory(max_concurrent=..., **extra)``."""

    max_concurrent: int = 2
    extra: Mapping[str, Any] = field(default_factory=dict)


# --- the registry -------------------------------------------------------------------

O = TypeVar("O")  # noqa: E741 -- the options' type


@dataclass(frozen=True)
class PoolKind(Generic[O]):
    name: str
    options: type[O]
    build: Callable[[O], Pool]
    #: whether user code runs in the jail (or, for the fake, not at all)
    jailed: bool
    doc: str


KINDS: dict[str, PoolKind[Any]] = {}


def register(kind: PoolKind[Any]) -> None:
    if kind.name in KINDS:
        raise ValueError(f"pool kind {kind.name!r} is registered already")
    KINDS[kind.name] = kind


def kind(name: str) -> PoolKind[Any]:
    """The kind ``name`` names (``module:factory`` for one outside the registry)."""
    if name in KINDS:
        return KINDS[name]
    if ":" in name:
        return PoolKind(name, CustomOptions, _custom(name), False, "a module:factory pool")
    raise PoolConfigError(
        f"pool: unknown {name!r}; choose one of {', '.join(KINDS)} or module:factory"
    )


def build(name: str, options: Any = None) -> Pool:
    """The pool ``name`` with ``options`` (its kind's dataclass; None: the defaults),
    constructed, not started."""
    chosen = kind(name)
    if options is None:
        try:
            options = chosen.options()
        except TypeError as exc:
            raise PoolConfigError(f"pool {name!r} needs options: {exc}") from None
    if not isinstance(options, chosen.options):
        raise PoolConfigError(
            f"pool {name!r} takes {chosen.options.__name__}, not {type(options).__name__}"
        )
    return chosen.build(options)


def with_fields(options: O, values: Mapping[str, Any]) -> O:
    """``options`` with some fields replaced by name (``JAXPLAY_POOL_OPTIONS``);
    PoolConfigError naming a field the kind does not have."""
    known = {f.name for f in dataclasses.fields(options)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - known)
    if unknown:
        raise PoolConfigError(
            f"bad pool_options: {', '.join(unknown)} (the pool takes {', '.join(sorted(known))})"
        )
    return dataclasses.replace(options, **values)  # type: ignore[type-var]


# --- the factories ------------------------------------------------------------------


def _fake(o: FakeOptions) -> Pool:
    from sandbox.pool.fake import FakePool

    return FakePool(o.max_concurrent)


def _subprocess(o: SubprocessOptions) -> Pool:
    from sandbox.pool.subprocess_pool import SubprocessPool

    return SubprocessPool(o.max_concurrent, python=o.python)


def _zygote(o: ZygoteOptions) -> Pool:
    """The jailed warm pool; JailUnavailable (saying what is missing) without a jail."""
    if o.device is not None:
        from sandbox.queue.devices import device_pool

        return device_pool(o.device, limits=o.limits, jail=o.jail, pool=o.pool)
    from sandbox.jail.jail import Jailer
    from sandbox.pool.zygote_pool import ZygotePool

    return ZygotePool(Jailer(o.limits, o.jail), o.pool)


def _auto(o: AutoOptions) -> Pool:
    """The jailed warm pool; without a usable jail it raises ``JailUnavailable`` (which
    says what is missing), unless ``unsafe_no_jail``: then it logs a loud warning and
    returns an unjailed ``SubprocessPool`` (never for a worker with devices to bind)."""
    from sandbox.jail.jail import JailUnavailable

    try:
        return _zygote(o)
    except JailUnavailable as exc:
        if o.device is not None and o.device.devices:
            raise
        if not o.unsafe_no_jail:
            raise JailUnavailable(
                f"{exc}. jaxplay will not run untrusted code without its jail; for local "
                "development only, set JAXPLAY_UNSAFE_NO_JAIL=1"
            ) from None
        log.critical(UNSAFE_WARNING, exc)
        return _subprocess(SubprocessOptions())


def _redis(o: RedisOptions) -> Pool:
    from sandbox.queue.client_pool import RedisPool

    return RedisPool(**dataclasses.asdict(o))


def _custom(spec: str) -> Callable[[CustomOptions], Pool]:
    def build(o: CustomOptions) -> Pool:
        module_name, _, attr = spec.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise PoolConfigError(f"pool {spec!r} cannot be loaded: {exc}") from exc
        if not callable(factory):
            raise PoolConfigError(f"pool {spec!r} is not callable")
        pool: Pool = factory(max_concurrent=o.max_concurrent, **o.extra)
        return pool

    return build


register(PoolKind("auto", AutoOptions, _auto, True, "the jailed warm pool, or refusal"))
register(PoolKind("zygote", ZygoteOptions, _zygote, True, "jailed warm zygotes"))
register(PoolKind("subprocess", SubprocessOptions, _subprocess, False, "unjailed, a process a run"))
register(PoolKind("redis", RedisOptions, _redis, True, "remote jaxplay worker machines"))
register(PoolKind("fake", FakeOptions, _fake, True, "scripted events; runs no code"))
