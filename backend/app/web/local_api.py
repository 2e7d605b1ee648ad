"""The REST API called from inside the server, as the client who asked: what the MCP
endpoint's tools use (backend/app/outside/mcp/endpoint.py), so that an agent is a client like
any other. Each call goes through the whole app in this process (no socket): the same
middleware (Host check, body limit), tenancy (the caller's token, session cookie and
address), rate limits, admission, cache and pristine-run rules as the route it names,
and the same error bodies. There is no second path to a run.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.app.tenancy.admission import CLIENT_GONE

#: the caller's headers that say who it is (tenancy.caller_for), carried over as sent;
#: nothing else is (no X-Forwarded-*: the address is the one the outer request has,
#: after the trusted proxies' word was taken once)
IDENTITY_HEADERS = ("authorization", "x-api-token", "cookie", "user-agent", "accept-language")


#: set in the scope of a call made from inside the server: the outer request (``POST
#: /mcp``) is the one HTTP request the client made, so only it is counted in /metrics
LOCAL_CALL = "jaxplay.local_call"


def _marked(app: ASGIApp) -> ASGIApp:
    async def marked(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, LOCAL_CALL: True}, receive, send)

    return marked


class CallerGone(Exception):
    """The client of the outer request went away while its call ran (the call is
    cancelled: its run ends, as a REST run does when its client leaves)."""


class LocalApi:
    """The REST API as the client of ``request`` (the HTTP request that carried an MCP
    message) would reach it."""

    def __init__(self, app: ASGIApp, request: Request) -> None:
        self._app = app
        client = request.client
        self._client = (client.host, client.port) if client is not None else ("unknown", 0)
        self._scheme = request.url.scheme
        self._headers = {
            name: request.headers[name] for name in IDENTITY_HEADERS if name in request.headers
        }
        self._headers["host"] = request.headers.get("host", "")

    async def call(
        self, method: str, path: str, *, json: Any = None, params: dict[str, str] | None = None
    ) -> httpx.Response:
        transport = httpx.ASGITransport(app=_marked(self._app), client=self._client)
        # Set by middleware.ClientPresence for the outer request: once its client is gone,
        # the call is cancelled, and with it the run (an agent that hangs up holds no place).
        gone = CLIENT_GONE.get()
        # The base URL's host is replaced by the caller's own Host header: the Host check
        # and the share links' base see what the caller sent.
        async with httpx.AsyncClient(
            transport=transport, base_url=f"{self._scheme}://local", timeout=None
        ) as client:
            calling = asyncio.ensure_future(
                client.request(method, path, json=json, params=params, headers=self._headers)
            )
            if gone is None:
                return await calling
            leaving = asyncio.ensure_future(gone.wait())
            try:
                await asyncio.wait({calling, leaving}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                leaving.cancel()
                if not calling.done():
                    calling.cancel()
                    await asyncio.gather(calling, return_exceptions=True)
            if calling.cancelled():
                raise CallerGone
            return calling.result()
