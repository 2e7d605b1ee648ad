"""One pool per JAX version: the default's always, the others on demand.

A request's ``jax_version`` picks the pool. The default version's pool is the one the
server was configured with; another version's is made from it for that version's
environment (sandbox/environments/versions.py) — for the jailed warm pool, the same jailer with
that version's interpreter and venv bound instead — started on its first run and
closed once it has had no run for ``idle_s``, so an old version costs nothing until
someone asks for it. Every version's warm pool takes its places and zygotes from the
default pool's one budget (sandbox/pool/budget.py): the versions share one machine.

A version that is not installed is refused with a message naming the command that
installs it. Installing is an operator's act (`jaxplay versions add`), never a side
effect of a run: nothing here installs anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sandbox.environments import library_choices
from sandbox.environments.library_choices import LibraryUnavailable
from sandbox.environments.versions import (
    OFFERED,
    Environment,
    Row,
    installed,
    listing,
    unknown_version_message,
)
from sandbox.pool.base import (
    ForEnvironment,
    MakesPristineRuns,
    Pool,
    RunHandle,
    SharesBudget,
    SignalsFree,
    TakesTurns,
    WaitsReady,
    submit_pristine,
)
from sandbox.pool.settings import PoolSettings
from sandbox.protocol import RunRequest

log = logging.getLogger(__name__)


class VersionUnavailable(Exception):
    """The request names a JAX version this pool cannot run; the message says why and
    what to do."""


def not_installed_message(version: str) -> str:
    return (
        f"jax {version} is not installed on this server; an operator installs it with "
        f"`jaxplay versions add {version}`"
    )


def beside_the_default(settings: PoolSettings) -> PoolSettings:
    """The settings of a pool beside the default (another JAX version's, other
    libraries'): the spares the machine sets are the default pool's, for its bursts of
    new clients; such a pool keeps one (a number an operator set is kept)."""
    if settings.pool_spares >= 0:
        return settings
    return dataclasses.replace(settings, pool_spares=1)


def pool_for_environment(base: Any, env: Environment) -> Pool:
    """A pool like ``base`` that runs ``env``'s interpreter and JAX, on ``base``'s
    machine: a warm pool takes from ``base``'s budget of places and zygotes."""
    from sandbox.pool.zygote_pool import ZygotePool

    if isinstance(base, ZygotePool):
        from sandbox.jail.bwrap import Runtime

        runtime = Runtime.for_environment(env.base_prefix, env.prefix)
        return ZygotePool(
            base.jailer.with_runtime(runtime),
            beside_the_default(base.settings),
            budget=base.budget,
        )
    if not isinstance(base, ForEnvironment):
        kind = base.stats().get("kind", type(base).__name__)
        raise VersionUnavailable(f"the {kind} pool runs only the default JAX version")
    return base.for_environment(env)


def pool_with_overlay(base: Any, env: Environment | None, overlay: tuple[str, ...]) -> Pool:
    """A pool like ``base`` whose zygotes start with ``overlay`` (library directories,
    sandbox/environments/library_choices.py) first on ``sys.path``, running ``env``'s interpreter
    (None: the default's); it takes from ``base``'s budget like another version's."""
    from sandbox.pool.zygote_pool import ZygotePool

    if not isinstance(base, ZygotePool):
        kind = base.stats().get("kind", type(base).__name__)
        raise LibraryUnavailable(f"the {kind} pool runs only each JAX version's default libraries")
    from sandbox.jail.bwrap import Runtime

    runtime = base.jailer.runtime
    if env is not None and not env.default:
        runtime = Runtime.for_environment(env.base_prefix, env.prefix)
    return ZygotePool(
        base.jailer.with_runtime(runtime.with_path_first(overlay)),
        beside_the_default(base.settings),
        budget=base.budget,
    )


class VersionedPool:
    """Implements sandbox.pool.base.Pool over one pool per JAX version, and
    RunsVersions; the default pool's optional capabilities are its own (neutral where
    the default lacks one: no turns, no wait, no free signal). MakesPristineRuns is
    the one a neutral answer would misstate: made over a default that makes pristine
    runs, a VersionedPool is a ``PristineVersionedPool`` (``__new__`` chooses), and
    otherwise has no ``submit_pristine`` at all."""

    def __new__(cls, default: Pool, *args: Any, **kwargs: Any) -> VersionedPool:
        if cls is VersionedPool and isinstance(default, MakesPristineRuns):
            cls = PristineVersionedPool
        return super().__new__(cls)

    def __init__(
        self,
        default: Pool,
        *,
        default_version: str,
        versions_dir: Path,
        idle_s: float = 600.0,
        make: Callable[[Any, Environment], Pool] = pool_for_environment,
        grant: Callable[[Environment], object] | None = None,
        libs_dir: Path | None = None,
        make_overlay: Callable[[Any, Environment | None, tuple[str, ...]], Pool] = (
            pool_with_overlay
        ),
    ) -> None:
        self.default = default
        self.default_version = default_version
        self.versions_dir = versions_dir
        self.idle_s = idle_s
        self._make = make
        self._grant = grant
        #: where the library overlays are (sandbox/environments/library_choices.py)
        self.libs_dir = libs_dir if libs_dir is not None else library_choices.LIBS
        self._make_overlay = make_overlay
        #: version (or version and library choices, ``library_choices.pool_name``) -> its started pool, and
        #: when it last took a run
        self._pools: dict[str, Pool] = {}
        self._last_used: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._reaper: asyncio.Task[None] | None = None
        self.started_pools = 0  # how many version pools were started (tests, stats)

    # --- what can run ---------------------------------------------------------------
    def versions(self) -> list[Row]:
        return listing(self.versions_dir, self.default_version)

    def resolve_version(self, version: str | None) -> str:
        """The version a request runs on; VersionUnavailable when it cannot here."""
        if version is None or version == self.default_version:
            return self.default_version
        if version in self._pools or version in installed(self.versions_dir):
            return version
        if version not in OFFERED:
            raise VersionUnavailable(unknown_version_message(version))
        raise VersionUnavailable(not_installed_message(version))

    def _python_version(self, version: str) -> str | None:
        env = installed(self.versions_dir).get(version)
        return env.python_version if env is not None else None

    def library_menu(self, version: str) -> dict[str, dict[str, object]]:
        """Library -> its ``default`` and installed ``alternatives`` on ``version``."""
        return library_choices.offered(version, self._python_version(version), self.libs_dir)

    def resolve_libraries(
        self, version: str | None, choices: dict[str, str]
    ) -> tuple[tuple[str, str], ...]:
        """The alternatives a request picks, defaults dropped; LibraryUnavailable
        naming what is offered where one is not."""
        if not choices:
            return ()
        resolved = self.resolve_version(version)
        return library_choices.resolve(
            resolved, choices, self._python_version(resolved), self.libs_dir
        )

    # --- lifecycle ------------------------------------------------------------------
    async def start(self) -> None:
        await self.default.start()
        self._reaper = asyncio.create_task(self._reap())

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        pools = [self.default, *self._pools.values()]
        self._pools.clear()
        await asyncio.gather(*(p.close() for p in pools), return_exceptions=True)

    # --- the default pool's capabilities, as this pool's -----------------------------
    # (each version's pool is of the default's kind, and shares its budget)
    async def ready(self, timeout_s: float = 120.0) -> None:
        if isinstance(self.default, WaitsReady):
            await self.default.ready(timeout_s)

    def on_free(self, listener: Callable[[], None]) -> None:
        if isinstance(self.default, SignalsFree):
            self.default.on_free(listener)

    @property
    def tenant_slots(self) -> int:
        return self.default.tenant_slots if isinstance(self.default, TakesTurns) else 0

    def end_turn(self, tenant: str) -> None:
        if isinstance(self.default, TakesTurns):
            self.default.end_turn(tenant)

    # --- runs -----------------------------------------------------------------------
    async def submit(self, request: RunRequest, tenant: str) -> RunHandle:
        return await self._submit(request, lambda pool: pool.submit(request, tenant))

    async def _submit(
        self, request: RunRequest, start: Callable[[Pool], Awaitable[RunHandle]]
    ) -> RunHandle:
        """``start`` the run in the pool of the request's version and libraries."""
        version = self.resolve_version(request.jax_version)
        picked = self.resolve_libraries(version, request.libraries)
        if version == self.default_version and not picked:
            return await start(self.default)
        pool = await self.pool(version, picked)
        handle = await start(pool)
        # Only a run its pool took keeps it up: a request the pool refused (PoolFull),
        # retried or not, is no use of it (one a minute would keep its spares forever).
        self._last_used[library_choices.pool_name(version, picked)] = time.monotonic()
        return handle

    async def pool(self, version: str, picked: tuple[tuple[str, str], ...] = ()) -> Pool:
        """The started pool of ``version`` with the library alternatives ``picked``
        (resolve_libraries' answer); VersionUnavailable where it is not installed."""
        if version == self.default_version and not picked:
            return self.default
        key = library_choices.pool_name(version, picked)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._pools:
                return self._pools[key]
            env = installed(self.versions_dir).get(version)
            if env is None:
                raise VersionUnavailable(not_installed_message(version))
            if self._grant is not None and not env.default:
                await asyncio.to_thread(self._grant, env)
            if picked:
                overlay = library_choices.overlays(
                    version, picked, env.python_version, self.libs_dir
                )
                pool = self._make_overlay(self.default, env, overlay)
            else:
                pool = self._make(self.default, env)
            log.info("starting the pool of jax %s (%s)", key, env.prefix)
            await pool.start()
            self._pools[key] = pool
            self._last_used[key] = time.monotonic()
            self.started_pools += 1
            return pool

    async def _reap(self) -> None:
        """Close version pools that have had no run for ``idle_s`` and run nothing."""
        while True:
            await asyncio.sleep(min(5.0, self.idle_s / 4))
            now = time.monotonic()
            for version, pool in list(self._pools.items()):
                idle = now - self._last_used.get(version, now)
                if idle >= self.idle_s and not pool.stats().get("running"):
                    log.info("closing the pool of jax %s: idle %.0f s", version, idle)
                    self._pools.pop(version, None)
                    with contextlib.suppress(Exception):
                        await pool.close()

    def running_versions(self) -> list[str]:
        """Versions whose pool is up now, the default first."""
        up = {key.split(" ", 1)[0] for key in self._pools} - {self.default_version}
        return [self.default_version, *sorted(up)]

    def stats(self) -> dict[str, Any]:
        stats = dict(self.default.stats())
        stats["version_pools"] = len(self._pools)  # other versions' pools up now (a metric)
        stats["jax_versions"] = {v: p.stats() for v, p in sorted(self._pools.items())}
        if isinstance(self.default, SharesBudget):  # what every version's pool takes from
            for key, value in self.default.budget.describe().items():
                stats[f"budget_{key}"] = value
        return stats


class PristineVersionedPool(VersionedPool):
    """A VersionedPool whose default makes pristine runs, and so every version's pool
    (each is of the default's kind): MakesPristineRuns, in the request's version."""

    async def submit_pristine(self, request: RunRequest, asked_by: str) -> RunHandle:
        return await self._submit(request, lambda pool: submit_pristine(pool, request, asked_by))
