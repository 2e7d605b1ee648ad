"""A client of the REST API: ``jaxplay run --server URL`` and scripts.

``stream_run`` POSTs a run request with ``Accept: application/x-ndjson`` and yields
its events as they arrive. A refusal (429/503) is retried after its ``Retry-After``
a bounded number of times; any other error answer raises ``ServerError``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from sandbox.protocol import RunRequest

NDJSON = "application/x-ndjson"
#: the header an API session is sent back in (backend/app/tenancy/identity.py, which the client
#: does not import: it is the server's)
SESSION_HEADER = "X-Jaxplay-Session"
#: the longest a Retry-After is honoured before giving up
MAX_RETRY_WAIT_S = 30.0


class ServerError(Exception):
    """The server refused the request; ``str()`` says why in words."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        retry_after_s: float | None = None,
        error: str = "",
    ) -> None:
        super().__init__(f"the server answered {status}: {message}")
        self.status, self.message, self.field, self.retry_after_s = (
            status,
            message,
            field,
            retry_after_s,
        )
        self.error = error  # the error's code (docs/api.md, Errors): "invalid_session"...


def _error(response: httpx.Response, body: bytes) -> ServerError:
    try:
        data = json.loads(body)
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    retry = response.headers.get("retry-after")
    return ServerError(
        response.status_code,
        str(data.get("message") or body[:200].decode("utf-8", "replace") or response.reason_phrase),
        data.get("field"),
        float(retry) if retry and retry.replace(".", "", 1).isdigit() else None,
        str(data.get("error") or ""),
    )


async def stream_run(
    server: str,
    request: RunRequest | dict[str, Any],
    *,
    token: str | None = None,
    session: str | None = None,
    cache: bool = True,
    retries: int = 2,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """The run's events from the server at ``server`` (e.g. ``http://127.0.0.1:8000``);
    ``session``: an API session (``open_session``) its runs share a kept process by."""
    body = (
        # defaults left to the server: a request from a newer client stays one an
        # older server reads
        request.model_dump(mode="json", exclude_defaults=True)
        if isinstance(request, RunRequest)
        else dict(request)
    )
    timeout_s = float(body.get("timeout_s") or 20.0)
    headers = {"Accept": NDJSON, "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if session:
        headers[SESSION_HEADER] = session
    url = server.rstrip("/") + "/api/v1/runs"
    params = {} if cache else {"cache": "false"}
    # Events can be far apart while XLA compiles: the read timeout covers a whole run.
    timeout = httpx.Timeout(10.0, read=timeout_s + 60.0)
    async with httpx.AsyncClient(timeout=timeout, transport=transport) as client:
        for attempt in range(retries + 1):
            async with client.stream(
                "POST", url, json=body, headers=headers, params=params
            ) as response:
                if response.status_code == 200:
                    async for line in response.aiter_lines():
                        if line.strip():
                            yield json.loads(line)
                    return
                error = _error(response, await response.aread())
            if error.status in (429, 503) and attempt < retries:
                wait = error.retry_after_s if error.retry_after_s is not None else 1.0
                if wait <= MAX_RETRY_WAIT_S:
                    await asyncio.sleep(wait)
                    continue
            raise error


async def open_session(
    server: str, *, transport: httpx.AsyncBaseTransport | None = None
) -> dict[str, Any]:
    """A new API session from the server (``POST /api/v1/sessions``): ``{"session",
    "max_age_s", "expires_at", ...}``; ServerError when it refuses (429: this address
    was issued its share lately; 404: a server from before sessions)."""
    url = server.rstrip("/") + "/api/v1/sessions"
    async with httpx.AsyncClient(timeout=10.0, transport=transport) as client:
        response = await client.post(url)
        if response.status_code != 201:
            raise _error(response, response.content)
        issued: dict[str, Any] = response.json()
        if not isinstance(issued.get("session"), str):
            raise ServerError(response.status_code, "the server's answer names no session")
        return issued
