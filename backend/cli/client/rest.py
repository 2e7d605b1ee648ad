"""A client of the REST API: ``jaxplay run --server URL`` and scripts.

``stream_run`` POSTs a run request with ``Accept: application/x-ndjson`` and yields
its events as they arrive. A refusal (429/503) is retried after its ``Retry-After``
a bounded number of times; any other error answer raises ``ServerError``.

Written on the standard library's ``http.client``, synchronously: a command that sends
one request and prints what comes back needs no event loop, and what this module imports
is part of every ``jaxplay run --server``'s wall time (httpx and asyncio cost a command
more than the run itself takes on a warm session).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

NDJSON = "application/x-ndjson"
#: the header an API session is sent back in (backend/app/tenancy/identity.py, which the client
#: does not import: it is the server's)
SESSION_HEADER = "X-Jaxplay-Session"
#: the longest a Retry-After is honoured before giving up
MAX_RETRY_WAIT_S = 30.0
#: to connect, and to read an answer that is not a run's stream
CONNECT_TIMEOUT_S = 10.0
#: beyond the run's own limit, how long a read may wait (events can be far apart while
#: XLA compiles: the read timeout covers a whole run)
READ_MARGIN_S = 60.0


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


def _error(response: http.client.HTTPResponse, body: bytes) -> ServerError:
    try:
        data = json.loads(body)
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    retry = response.getheader("retry-after")
    return ServerError(
        response.status,
        str(data.get("message") or body[:200].decode("utf-8", "replace") or response.reason),
        data.get("field"),
        float(retry) if retry and retry.replace(".", "", 1).isdigit() else None,
        str(data.get("error") or ""),
    )


def _connect(url: str) -> tuple[http.client.HTTPConnection, str]:
    """A connection to ``url``'s server, connected, and the path to ask it for."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not a server URL: {url!r} (http://HOST:PORT or https://...)")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=CONNECT_TIMEOUT_S)
    connection.connect()
    return connection, parts.path + (f"?{parts.query}" if parts.query else "")


@contextlib.contextmanager
def _post(
    url: str, body: bytes | None, headers: dict[str, str], read_timeout_s: float
) -> Iterator[http.client.HTTPResponse]:
    """The answer to a POST of ``body`` to ``url``, its connection closed after; an
    answer that breaks off is a ConnectionError, as a server that cannot be reached."""
    connection, path = _connect(url)
    try:
        assert connection.sock is not None
        connection.sock.settimeout(read_timeout_s)
        connection.request("POST", path, body=body, headers=headers)
        yield connection.getresponse()
    except http.client.HTTPException as exc:
        raise ConnectionError(f"the server's answer broke off: {exc!r}") from exc
    finally:
        connection.close()


def stream_run(
    server: str,
    request: Mapping[str, Any],
    *,
    token: str | None = None,
    session: str | None = None,
    cache: bool = True,
    retries: int = 2,
) -> Iterator[dict[str, Any]]:
    """The run's events from the server at ``server`` (e.g. ``http://127.0.0.1:8000``);
    ``session``: an API session (``open_session``) its runs share a kept process by.
    ``request`` is sent as it is: the server checks it (a mistake: ServerError 422)."""
    body = json.dumps(dict(request)).encode()
    timeout_s = request.get("timeout_s")
    read_timeout_s = (timeout_s if isinstance(timeout_s, (int, float)) else 20.0) + READ_MARGIN_S
    headers = {"Accept": NDJSON, "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if session:
        headers[SESSION_HEADER] = session
    url = (
        server.rstrip("/") + "/api/v1/runs" + ("" if cache else "?" + urlencode({"cache": "false"}))
    )
    for attempt in range(retries + 1):
        with _post(url, body, headers, read_timeout_s) as response:
            if response.status == 200:
                for line in response:
                    if line.strip():
                        yield json.loads(line)
                return
            error = _error(response, response.read())
        if error.status in (429, 503) and attempt < retries:
            wait = error.retry_after_s if error.retry_after_s is not None else 1.0
            if wait <= MAX_RETRY_WAIT_S:
                time.sleep(wait)
                continue
        raise error


def open_session(server: str) -> dict[str, Any]:
    """A new API session from the server (``POST /api/v1/sessions``): ``{"session",
    "max_age_s", "expires_at", ...}``; ServerError when it refuses (429: this address
    was issued its share lately; 404: a server from before sessions)."""
    url = server.rstrip("/") + "/api/v1/sessions"
    with _post(url, None, {"Content-Length": "0"}, CONNECT_TIMEOUT_S) as response:
        body = response.read()
        if response.status != 201:
            raise _error(response, body)
        try:
            issued = json.loads(body)
        except ValueError:
            issued = None
        if not isinstance(issued, dict) or not isinstance(issued.get("session"), str):
            raise ServerError(response.status, "the server's answer names no session")
        return issued
