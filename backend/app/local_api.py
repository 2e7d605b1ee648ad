"""The REST API called from inside the server, as the client who asked: what the MCP
endpoint's tools use (backend/app/mcp_endpoint.py), so that an agent is a client like
any other. Each call goes through the whole app in this process (no socket): the same
middleware (Host check, body limit), tenancy (the caller's token, session cookie and
address), rate limits, admission, cache and pristine-run rules as the route it names,
and the same error bodies. There is no second path to a run.
"""

from __future__ import annotations

from typing import Any

import httpx
from starlette.requests import Request
from starlette.types import ASGIApp

#: the caller's headers that say who it is (tenancy.caller_for), carried over as sent;
#: nothing else is (no X-Forwarded-*: the address is the one the outer request has,
#: after the trusted proxies' word was taken once)
IDENTITY_HEADERS = ("authorization", "x-api-token", "cookie", "user-agent", "accept-language")


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
        transport = httpx.ASGITransport(app=self._app, client=self._client)
        # The base URL's host is replaced by the caller's own Host header: the Host check
        # and the share links' base see what the caller sent.
        async with httpx.AsyncClient(
            transport=transport, base_url=f"{self._scheme}://local", timeout=None
        ) as client:
            return await client.request(
                method, path, json=json, params=params, headers=self._headers
            )
