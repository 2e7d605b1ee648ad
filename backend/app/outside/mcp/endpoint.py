"""The MCP endpoint, ``/mcp`` (Streamable HTTP, the official ``mcp`` SDK's low-level
server, stateless, JSON answers): jaxplay's tools for coding agents.

- ``run``: a run request (its input schema is the REST body's, made from the protocol's
  ``RunRequest``); answers the outputs as text and as structured content, each capped.
- ``across``: one request on several JAX versions, where each output first changed.
- ``share``: stores the request as a snippet; answers its link.
- ``op_docs``: a primitive's or op's docs, as the page shows them on hover.
- ``versions``: the JAX versions offered, and each one's libraries.

Every tool that touches runs or snippets calls the REST route as the caller
(backend/app/web/local_api.py): same tenancy, rate limits, admission, cache and
pristine-run rules, same errors; a refusal is a tool error that carries the REST
error body, its ``retry_after_s`` included. The Host check (middleware.HostCheck)
wraps ``/mcp`` like every route; a browser's ``Origin`` must be the server's own or
one it allows (the WebSocket's rule, web/middleware.py ``origin_allowed``), since a page
on another site could otherwise drive an agent's tools with the visitor's cookie.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.app.core.errors import error_response
from backend.app.core.logs import fields, get_logger
from backend.app.core.settings import Settings
from backend.app.core.wire import ErrorBody
from backend.app.web.middleware import origin_allowed

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = get_logger("mcp")

PATH = "/mcp"


class _OriginCheck:
    """A browser's request (it sends ``Origin``) from a site that is not this server's
    own or one it allows is refused: 403, before the SDK reads it."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            origin = request.headers.get("origin")
            if origin is not None and not origin_allowed(request, self.settings, origin):
                log.info("mcp.refused", extra=fields(reason="origin", origin=origin[:100]))
                body = ErrorBody(
                    status=403,
                    error="forbidden_origin",
                    message=f"pages from {origin[:100]} may not call this server's MCP tools",
                )
                await error_response(body)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class McpEndpoint:
    """The ASGI app served at ``/mcp`` and the context its sessions run in.

    The SDK (backend/app/outside/mcp/tools.py) is imported, and its session manager started, on
    the endpoint's first request, in a task of its own that holds the manager's
    ``run()`` until the lifespan ends: a server no agent calls never pays for it. Each
    start of the app makes a new one."""

    def __init__(self, settings: Settings, version: str) -> None:
        self.settings, self.version = settings, version
        self.app: ASGIApp = _OriginCheck(self._serve, settings)
        self._started = False  # within a lifespan
        self._manager: StreamableHTTPSessionManager | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._starting: asyncio.Lock | None = None

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = await self._manager_now() if self._started else None
        if manager is None:  # only between lifespans (a test client's app, not started)
            body = ErrorBody(status=503, error="starting", message="the server is not started")
            await error_response(body)(scope, receive, send)
            return
        await manager.asgi_app(scope, receive, send)

    async def _manager_now(self) -> StreamableHTTPSessionManager | None:
        if self._manager is not None:
            return self._manager
        assert self._starting is not None
        async with self._starting:
            if self._manager is None and self._started:
                await self._start_manager()
        return self._manager

    async def _start_manager(self) -> None:
        # imported off the event loop: other requests go on meanwhile (~0.5 s, once)
        tools: Any = await asyncio.to_thread(
            importlib.import_module, "backend.app.outside.mcp.tools"
        )
        if not self._started:  # the lifespan ended meanwhile: nothing to start
            return
        manager = tools.session_manager(self.settings, self.version)
        running, stop = asyncio.Event(), asyncio.Event()

        async def hold() -> None:
            # the manager's task group is entered and left in this one task
            async with manager.run():
                running.set()
                await stop.wait()

        # known at once, so that a lifespan ending from here on stops it
        holder = self._holder = asyncio.create_task(hold())
        self._stop = stop
        waiting = asyncio.create_task(running.wait())
        await asyncio.wait({holder, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not running.is_set():  # the manager did not start: say so on this request
            waiting.cancel()
            self._holder = self._stop = None
            holder.result()
            raise RuntimeError("the MCP session manager stopped as it started")
        if self._started:
            self._manager = manager
            log.info("mcp.start", extra=fields(tools=len(tools.TOOLS)))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self._starting = asyncio.Lock()
        self._started = True
        try:
            yield
        finally:
            self._started = False
            holder, stop = self._holder, self._stop
            self._manager = self._holder = self._stop = None
            if holder is not None and stop is not None:
                stop.set()
                await holder
