"""Pure ASGI middleware: the body size limit, security headers, access logs with HTTP
metrics, the ``Host`` check (DNS rebinding), and the client's presence (a disconnect
noticed while a request waits).

Pure ASGI rather than ``BaseHTTPMiddleware`` so that streamed answers (NDJSON) pass
through event by event, never buffered.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.app.core.errors import error_response
from backend.app.core.logs import fields, get_logger
from backend.app.core.metrics import Metrics
from backend.app.core.settings import Settings
from backend.app.core.wire import ErrorBody, ErrorPayload, ServerError
from backend.app.tenancy.admission import CLIENT_GONE
from backend.app.web.local_api import LOCAL_CALL

log = get_logger("http")


class BodyLimit:
    """Answers 413 for a body over ``max_bytes`` before the app parses any of it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        too_large = ErrorBody(
            status=413,
            error="too_large",
            message=f"body: over {self.max_bytes} bytes",
            field="body",
        )
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await error_response(too_large)(scope, receive, send)
                    return
        # Read the whole (bounded) body now, then hand it to the app in one message.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await error_response(too_large)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def content_security_policy(frame_ancestors: str, *, script: str = "") -> str:
    """The page's CSP: scripts only from this origin (``script`` adds sources: hashes
    of inline ones), no plugins, no ``<base>``, images also as ``data:`` (the
    favicon), workers only from this origin (the Graph tab's layout worker, a module
    Vite bundles into dist/assets: no blob: URL, no eval). Styles may be inline: the editor (CodeMirror) adds ``<style>`` elements
    and the page sets ``style`` attributes; styles cannot run code."""
    parts = [
        "default-src 'self'",
        f"script-src 'self' {script}".strip(),
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "worker-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        f"frame-ancestors {frame_ancestors}",
    ]
    return "; ".join(parts)


class SecurityHeaders:
    """Adds ``X-Content-Type-Options: nosniff``, a Referrer-Policy and the CSP to every
    HTTP answer that did not set its own (the placeholder page, /docs)."""

    def __init__(self, app: ASGIApp, frame_ancestors: str) -> None:
        self.app = app
        self.headers = [
            (b"x-content-type-options", b"nosniff"),
            # Shared links are capabilities of a sort: never leak one to another site.
            (b"referrer-policy", b"no-referrer"),
            (b"content-security-policy", content_security_policy(frame_ancestors).encode()),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(n, v) for n, v in self.headers if n not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class AccessLog:
    """One log line and one metrics sample per HTTP request, by route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            seconds = time.perf_counter() - started
            route = _route_template(scope)
            if not scope.get(LOCAL_CALL):
                self.metrics.http_request(scope["method"], route, status, seconds)
            if route not in ("/metrics", "/healthz"):
                log.info(
                    "http",
                    extra=fields(
                        method=scope["method"],
                        path=scope["path"],
                        route=route,
                        status=status,
                        ms=round(seconds * 1000, 2),
                        client=(scope.get("client") or ("", 0))[0],
                    ),
                )


def _route_template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "unmatched"


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Whether a ``Host`` header (``name``, ``name:port``, ``[v6]:port``) is one of
    ``allowed``: an entry ``name`` takes any port, ``name:port`` only that one, ``*``
    anything."""
    if "*" in allowed:
        return True
    host = host.strip().lower()
    if host.startswith("["):
        name, bracket, rest = host.partition("]")
        name += bracket
        if not bracket or (rest and not rest.startswith(":")):
            return False
    else:
        name = host.partition(":")[0]
    return bool(name) and any(entry.lower() in (host, name) for entry in allowed)


#: Bind addresses that name no one address (every interface): not a name to answer to.
_WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})


def _host_entry(name: str) -> str:
    """``name`` as a ``Host`` header writes it: an IPv6 address between brackets."""
    name = name.strip().lower()
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def served_hosts(
    allowed_hosts: Sequence[str], public_url: str | None, bound_host: str
) -> list[str]:
    """The names this server answers to, on every route (HTTP and WebSocket):
    ``allowed_hosts`` (by default the loopback names: ``localhost``, ``127.0.0.1``,
    ``[::1]``), the host of ``public_url`` when it is set (any port: a proxy in front
    forwards its own ``Host``, often without the port), and the address it binds to
    when that is one address (``0.0.0.0`` or ``::`` is every interface: no name)."""
    names = [*allowed_hosts]
    if public_url:
        hostname = urlsplit(public_url).hostname
        if hostname:
            names.append(_host_entry(hostname))
    if bound_host.strip().lower() not in _WILDCARDS:
        names.append(_host_entry(bound_host))
    return list(dict.fromkeys(names))


def request_host(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"host":
            return value.decode("latin-1")
    return ""


class HostCheck:
    """Refuses a request or WebSocket whose ``Host`` is not one of ``allowed``
    (``served_hosts``), on every route, with or without ``public_url``. A page on
    another site that rebinds its DNS name to this server's address (or to a proxy
    in front of it that forwards any ``Host``) reaches it as the same origin in the
    browser's eyes, but its requests still say that name in ``Host``: refused here
    with 421 Misdirected Request, they reach nothing."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str]) -> None:
        self.app, self.allowed = app, list(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = request_host(scope)
        if host_allowed(host, self.allowed):
            await self.app(scope, receive, send)
            return
        message = (
            f"this server does not answer to Host {host[:100]!r} (it answers to "
            "JAXPLAY_ALLOWED_HOSTS, JAXPLAY_PUBLIC_URL's host and the address it binds to)"
        )
        log.info("host.refused", extra=fields(host=host[:100], type=scope["type"]))
        if scope["type"] == "http":
            body = ErrorBody(status=421, error="misdirected_request", message=message)
            await error_response(body)(scope, receive, send)
            return
        # A browser cannot read the status of a refused handshake: accept, say why, 1008.
        if (await receive())["type"] != "websocket.connect":
            return
        error = ServerError(seq=-1, payload=ErrorPayload(message=message, status=421))
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": error.model_dump_json(exclude_none=True)})
        await send({"type": "websocket.close", "code": 1008, "reason": "Host not allowed"})


class ClientPresence:
    """Gives a POST request (a run) an event set once its client disconnects before
    the answer is complete (``admission.CLIENT_GONE``), so a run waiting in line for
    a worker gives its place up at once instead of at its timeout. Watches for the
    disconnect only after the body was read, and hands the same message on to the app
    when it asks."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        gone = asyncio.Event()
        answered = False
        after_body: asyncio.Task[Message] | None = None

        async def watch() -> Message:
            message = await receive()  # after the body: the client leaving, or the end
            if not answered:
                gone.set()
            return message

        async def receive_or_watch() -> Message:
            nonlocal after_body
            if after_body is not None:
                return await asyncio.shield(after_body)
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
            elif not message.get("more_body", False):
                after_body = asyncio.ensure_future(watch())
            return message

        async def send_noting_end(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        token = CLIENT_GONE.set(gone)
        try:
            await self.app(scope, receive_or_watch, send_noting_end)
        finally:
            CLIENT_GONE.reset(token)
            if after_body is not None and not after_body.done():
                after_body.cancel()
                with contextlib.suppress(BaseException):
                    await after_body


def origin_allowed(ws: HTTPConnection, settings: Settings, origin: str) -> bool:
    """A browser page may open the WebSocket only from the server's own origin or one
    of ``ws_origins`` and ``cors_origins`` (a site allowed to call the API may open its
    socket too). The own origin is ``public_url``'s when it is set, and the request's
    ``Host`` is then ignored: a page that rebinds its DNS name to this server sends its
    own name there. Without it, the ``Host`` the request came to, if it is one of
    ``allowed_hosts`` (middleware.HostCheck refuses the others before this)."""
    own: set[str] = set()
    if settings.public_url:
        parts = urlsplit(settings.public_url)
        own.add(f"{parts.scheme}://{parts.netloc}".lower())
    else:
        host = ws.headers.get("host", "")
        if host_allowed(host, served_hosts(settings.allowed_hosts, None, settings.host)):
            scheme = "https" if ws.url.scheme in ("wss", "https") else "http"
            own.add(f"{scheme}://{host}".lower())
    own.update(o.rstrip("/").lower() for o in [*settings.ws_origins, *settings.cors_origins])
    return origin.rstrip("/").lower() in own
