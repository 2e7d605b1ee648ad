"""Compression of the server's text answers: brotli where the client accepts it, else
gzip (pure ASGI, so nothing is buffered that should stream).

What is compressed: a ``200`` answer whose type is text (HTML, JSON, JavaScript, CSS,
SVG, the metrics' text...) of at least ``minimum_size`` bytes, that carries no
``Content-Encoding`` of its own (the page's precompressed assets, backend/app/web/assets.py)
and no ``Cache-Control: no-transform``. Never: the WebSocket, partial answers (Range),
and the event streams (``application/x-ndjson``, ``text/event-stream``): a compressor
holds bytes back until it has enough to be worth it, and an event must reach the
client the moment the run made it. Every answer of a compressible type says ``Vary:
Accept-Encoding``, so a shared cache keeps one copy per encoding. A compressed
answer's ``ETag`` becomes weak (``W/``): its bytes are no longer the identity's.

Brotli is Google's own binding (the ``brotli`` package); gzip is the standard
library's zlib. A body streamed in several chunks (a file) is compressed chunk by
chunk, each flushed, so a stream stays a stream. A chunk over ``THREAD_BYTES`` is
compressed in a worker thread: ~5-10 ms of CPU per 64 KiB at these levels, which the
event loop (every other client's events) should not wait for.
"""

from __future__ import annotations

import zlib
from typing import Protocol

import anyio.to_thread
import brotli
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: content types compressed (a prefix of the type, before any parameter)
COMPRESSIBLE = (
    "text/",
    "application/json",
    "application/problem+json",
    "application/javascript",
    "application/xml",
    "application/manifest+json",
    "application/vnd.oai.openapi",
    "image/svg+xml",
)
#: streams of events: never compressed (see the module's doc)
STREAMED = ("application/x-ndjson", "text/event-stream")
#: the encodings this server makes, best first
ENCODINGS = ("br", "gzip")
#: chunks larger than this are compressed off the event loop
THREAD_BYTES = 16 * 1024


def negotiate(accept_encoding: str | None, offered: tuple[str, ...] = ENCODINGS) -> str | None:
    """The encoding of ``offered`` the client prefers (``Accept-Encoding``, with its
    ``q`` values and ``*``), ties going to the earlier in ``offered``; None for identity."""
    if not accept_encoding:
        return None
    weights: dict[str, float] = {}
    for part in accept_encoding.split(","):
        name, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, val = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(val)
                except ValueError:
                    q = 0.0
        if name.strip():
            weights[name.strip().lower()] = q
    best: tuple[float, str] | None = None
    for name in offered:
        q = weights.get(name, weights.get("*", 0.0))
        if q > 0 and (best is None or q > best[0]):
            best = (q, name)
    return best[1] if best is not None else None


def compressible(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    if not kind or kind.startswith(STREAMED):
        return False
    return kind.startswith(COMPRESSIBLE)


def add_vary(headers: MutableHeaders, name: str = "Accept-Encoding") -> None:
    present = [v.strip().lower() for v in headers.get("vary", "").split(",") if v.strip()]
    if "*" not in present and name.lower() not in present:
        headers["vary"] = ", ".join([*filter(None, [headers.get("vary", "")]), name])


class _Encoder(Protocol):
    def chunk(self, data: bytes) -> bytes: ...
    def end(self, data: bytes) -> bytes: ...


async def _encode(encoder: _Encoder, data: bytes, last: bool) -> bytes:
    work = encoder.end if last else encoder.chunk
    if len(data) > THREAD_BYTES:
        return await anyio.to_thread.run_sync(work, data)
    return work(data)


class _Brotli:
    def __init__(self, quality: int) -> None:
        self._c = brotli.Compressor(quality=quality, mode=brotli.MODE_TEXT)

    def chunk(self, data: bytes) -> bytes:
        return bytes(self._c.process(data)) + bytes(self._c.flush())

    def end(self, data: bytes) -> bytes:
        return bytes(self._c.process(data)) + bytes(self._c.finish())


class _Gzip:
    def __init__(self, level: int) -> None:
        self._c = zlib.compressobj(level, zlib.DEFLATED, 31)  # 31: the gzip container

    def chunk(self, data: bytes) -> bytes:
        return self._c.compress(data) + self._c.flush(zlib.Z_SYNC_FLUSH)

    def end(self, data: bytes) -> bytes:
        return self._c.compress(data) + self._c.flush(zlib.Z_FINISH)


class Compression:
    """Compresses text answers as the client accepts (see the module's doc)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        minimum_size: int = 512,
        gzip_level: int = 6,
        brotli_quality: int = 5,
    ) -> None:
        self.app = app
        self.minimum_size = minimum_size
        self.gzip_level = gzip_level
        self.brotli_quality = brotli_quality

    def _encoder(self, encoding: str) -> _Encoder:
        if encoding == "br":
            return _Brotli(self.brotli_quality)
        return _Gzip(self.gzip_level)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the WebSocket: never
            await self.app(scope, receive, send)
            return
        encoding = negotiate(Headers(scope=scope).get("accept-encoding"))
        if encoding is not None and "http.response.pathsend" in scope.get("extensions", {}):
            # A file handed to the server by path would skip the encoder: ask for bytes.
            extensions = {
                k: v for k, v in scope["extensions"].items() if k != "http.response.pathsend"
            }
            scope = {**scope, "extensions": extensions}
        head_only = scope["method"] == "HEAD"
        start: Message | None = None
        encoder: _Encoder | None = None
        passthrough = False

        async def wrapped(message: Message) -> None:
            nonlocal start, encoder, passthrough
            kind = message["type"]
            if kind == "http.response.start":
                headers = MutableHeaders(raw=list(message.get("headers", [])))
                typed = compressible(headers.get("content-type", ""))
                if typed:
                    add_vary(headers)
                message = {**message, "headers": headers.raw}
                eligible = (
                    typed
                    and encoding is not None
                    and not head_only
                    and message["status"] == 200
                    and "content-encoding" not in headers
                    and "content-range" not in headers
                    and "no-transform" not in headers.get("cache-control", "").lower()
                )
                if not eligible:
                    passthrough = True
                    await send(message)
                else:
                    start = message  # held until the first body says how big it is
                return
            if kind != "http.response.body" or passthrough or start is None:
                await send(message)
                return
            body: bytes = message.get("body", b"")
            more: bool = message.get("more_body", False)
            if encoder is None:
                headers = MutableHeaders(raw=start["headers"])
                if not more and len(body) < self.minimum_size:
                    passthrough = True
                    await send(start)
                    await send(message)
                    return
                assert encoding is not None
                encoder = self._encoder(encoding)
                headers["content-encoding"] = encoding
                del headers["accept-ranges"]
                etag = headers.get("etag")
                if etag and not etag.startswith("W/"):
                    headers["etag"] = "W/" + etag
                if more:
                    del headers["content-length"]
                    await send(start)
                else:
                    data = await _encode(encoder, body, last=True)
                    headers["content-length"] = str(len(data))
                    await send(start)
                    await send({"type": "http.response.body", "body": data, "more_body": False})
                    return
            data = await _encode(encoder, body, last=not more)
            if data or not more:
                await send({"type": "http.response.body", "body": data, "more_body": more})

        await self.app(scope, receive, wrapped)
