"""The app factory: ``create_app(settings)`` builds the app; its lifespan builds the
services (pool, storage, cache, admission, metrics) and takes them down again.
Nothing is created at import time. Tests pass a pool or a storage of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.routing import Match, Route
from starlette.types import Scope
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from backend.app.core.errors import install_error_handlers
from backend.app.core.logs import fields, get_logger, redact_url
from backend.app.core.metrics import Metrics, serve_metrics
from backend.app.core.settings import Settings
from backend.app.outside.mcp.endpoint import PATH as MCP_PATH
from backend.app.outside.mcp.endpoint import McpEndpoint
from backend.app.relay.figures import RunStats
from backend.app.relay.pools import make_pool
from backend.app.relay.service import RunService
from backend.app.routes import across, meta, pages, report, runs, sessions, snippets, watch, ws
from backend.app.routes import notebooks as notebook_import
from backend.app.routes import stats as public_stats
from backend.app.routes.docs import mount_docs
from backend.app.services.container import Services
from backend.app.storage.base import Storage
from backend.app.storage.url import open_storage
from backend.app.tenancy.admission import Admission
from backend.app.tenancy.caller import Caller
from backend.app.tenancy.identity import Sessions
from backend.app.trust.cache import ResultCache, engine_fingerprint
from backend.app.trust.confirm import Confirmer
from backend.app.web.assets import AssetFiles
from backend.app.web.compression import Compression
from backend.app.web.middleware import (
    AccessLog,
    BodyLimit,
    ClientPresence,
    HostCheck,
    SecurityHeaders,
    served_hosts,
)
from sandbox.pool.base import MakesPristineRuns, Pool
from sandbox.protocol import PROTOCOL_VERSION, RunRequest

log = get_logger("app")

#: the request that tells the server what its pool runs on (see Settings.probe_on_start)
PROBE = RunRequest.model_validate(
    {"code": "def f():\n    return 0\n", "outputs": ["jaxpr"], "timeout_s": 60}
)

DESCRIPTION = """\
Run a JAX function through a pipeline of transformations and see what JAX makes of it:
the jaxpr, StableHLO, optimised HLO, values, cost and timings, as a stream of events.
The WebSocket (`GET /api/v1/ws`) is not listed below: see docs/api.md.
"""


def jaxplay_version() -> str:
    try:
        return package_version("jaxplay")
    except PackageNotFoundError:
        return "0+unknown"


def create_app(
    settings: Settings | None = None,
    *,
    pool: Pool | None = None,
    pool_name: str | None = None,
    storage: Storage | None = None,
) -> FastAPI:
    """The jaxplay server. ``pool`` and ``storage`` replace the configured ones."""
    settings = settings if settings is not None else Settings()
    version = jaxplay_version()
    metrics = Metrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        services = await _start_services(settings, version, metrics, pool, pool_name, storage)
        app.state.services = services
        # the public figures (GET /api/v1/stats), written beside the snippets
        services.runs.stats = stats = RunStats(services.storage, settings.stats_cache_s)
        stats.start()
        metrics_listener = None
        if settings.metrics_port is not None:
            metrics_listener = await serve_metrics(
                metrics, settings.metrics_host, settings.metrics_port
            )
        probe = None
        if settings.probe_on_start:
            probe = asyncio.create_task(_probe(services))
        log.info(
            "server.start",
            extra=fields(
                version=version,
                pool=services.pool_name,
                database=redact_url(settings.database_url),
                queue=redact_url(settings.queue_url),
            ),
        )
        try:
            async with mcp.running() if mcp is not None else contextlib.nullcontext():
                yield
        finally:
            if probe is not None:
                probe.cancel()
                with contextlib.suppress(BaseException):
                    await probe
            await services.runs.aclose()
            if services.runs.confirmer is not None:
                await _close_quietly("confirmer", services.runs.confirmer.close())
                if services.runs.confirmer.pool is not services.pool:
                    await _close_quietly("pristine pool", services.runs.confirmer.pool.close())
            await _close_quietly("pool", services.pool.close())
            await _close_quietly("stats", stats.close())
            await _close_quietly("storage", services.storage.close())
            if metrics_listener is not None:
                metrics_listener.close()
            log.info("server.stop")

    app = FastAPI(
        title="jaxplay",
        version=version,
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_url="/openapi.json",
        docs_url=None,  # served by mount_docs, from the server's own files
        redoc_url=None,
    )
    install_error_handlers(app)
    mount_docs(app, settings.frame_ancestors)
    # The MCP endpoint (agents): its tools call the routes below as the caller.
    mcp = McpEndpoint(settings, version) if settings.mcp_enabled else None
    if mcp is not None:
        app.router.routes.append(
            NamedRoute(
                MCP_PATH, mcp.app, methods=["GET", "POST", "DELETE"], include_in_schema=False
            )
        )
    for router in (
        runs.router,
        sessions.router,
        across.router,
        watch.router,
        notebook_import.router,  # before snippets: /snippets/import is not an id
        report.router,
        public_stats.router,
        snippets.router,
        meta.router,
        pages.router,
        ws.router,
    ):
        app.include_router(router)
    dist = settings.frontend_dist
    if (dist / "index.html").is_file():
        # The built page's files; routes above win, this catches the rest. Hashed
        # assets are immutable, precompressed variants served (backend/app/web/assets.py).
        app.mount("/", AssetFiles(directory=dist), name="frontend")
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(ClientPresence)  # outside BodyLimit: it sees where the body ends
    # Text answers compressed as accepted; never the WebSocket or an event stream.
    app.add_middleware(Compression)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "Accept", "Authorization", "X-API-Token"],
        )
    # DNS rebinding: only the names this server serves are answered at all, on every
    # route, with or without a public URL (a proxy in front may forward any Host).
    app.add_middleware(
        HostCheck,
        allowed=served_hosts(settings.allowed_hosts, settings.public_url, settings.host),
    )
    app.add_middleware(SecurityHeaders, frame_ancestors=settings.frame_ancestors)
    app.add_middleware(AccessLog, metrics=metrics)
    if settings.trusted_proxies:
        # Outermost: everything after it (logs, tenants, rate limits) sees the client the
        # trusted proxy forwarded; a peer that is not one of them is taken as it is.
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.trusted_proxies)
    return app


async def _start_services(
    settings: Settings,
    version: str,
    metrics: Metrics,
    pool: Pool | None,
    pool_name: str | None,
    storage: Storage | None,
) -> Services:
    if pool is None:
        pool_name, pool = make_pool(settings)
    store = storage if storage is not None else open_storage(settings.database_url)
    await store.open()
    try:
        await pool.start()
    except BaseException:
        await store.close()
        raise
    name = pool_name or type(pool).__name__
    metrics.watch_pool(pool.stats)
    admission = Admission(settings, metrics)
    cache = ResultCache(
        store,
        settings,
        context={
            "jaxplay": version,
            "protocol": PROTOCOL_VERSION,
            "engine": engine_fingerprint(),
            "pool": name,
            "pool_options": settings.pool_options,
        },
    )
    confirmer = Confirmer(settings, await _pristine_pool(settings, pool), cache, admission, metrics)
    confirmer.start()
    return Services(
        settings=settings,
        version=version,
        pool_name=name,
        pool=pool,
        storage=store,
        metrics=metrics,
        admission=admission,
        cache=cache,
        runs=RunService(settings, pool, admission, cache, metrics, confirmer),
        sessions=Sessions(settings),
        known_tokens=frozenset(settings.api_tokens),
    )


async def _pristine_pool(settings: Settings, pool: Pool) -> Pool:
    """The pool pristine runs are made in: the server's own, or, where that one cannot
    make them (Redis workers), the ``pristine_pool`` the operator names, started here."""
    if isinstance(pool, MakesPristineRuns) or not settings.pristine_pool:
        return pool
    _, own = make_pool(
        settings.model_copy(update={"pool": settings.pristine_pool, "queue_url": None})
    )
    await own.start()
    return own


async def _probe(services: Services) -> None:
    """One tiny run, so /api/v1/backends and the cache know the pool's worker."""
    try:
        stream = await services.runs.start(
            PROBE, Caller("server:probe", "server:probe"), use_cache=False
        )
        async with contextlib.aclosing(stream.events()) as events:
            async for event in events:
                if event.get("type") == "done":
                    log.info(
                        "probe.done", extra=fields(status=event.get("status"), ms=event.get("ms"))
                    )
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("probe.failed", extra=fields(error=repr(exc)))


async def _close_quietly(what: str, closing: object) -> None:
    try:
        await closing  # type: ignore[misc]
    except Exception as exc:
        log.warning("close.failed", extra=fields(what=what, error=repr(exc)))


class NamedRoute(Route):
    """A route to a plain ASGI app that names itself in the scope as FastAPI's routes do,
    so the access log and /metrics count its requests under its path, not "unmatched"."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match != Match.NONE:
            child = {**child, "route": self}
        return match, child
