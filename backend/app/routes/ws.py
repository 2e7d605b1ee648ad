"""``GET /api/v1/ws``: one connection, one event loop, one envelope (SPEC §3).

The server greets with ``hello``; the client sends ``run`` (a new run cancels the
connection's previous one), ``cancel`` and optionally ``hello``; events go out as
``{"type": "event", "seq": N, "payload": event}`` as the pool produces them, ending
with ``done``; problems as ``{"type": "error", "seq": N or -1, ...}``. A run either
gets events ending in ``done`` or one ``error`` carrying its ``seq`` (refused before
it started: the payload's ``status`` is the HTTP status REST would give).

Named timeouts (settings): the first client message within ``handshake_timeout_s``;
closed after ``idle_timeout_s`` without a run or a message; at most
``session_timeout_s`` in all. Close codes: 1000 normal, 1001 a timeout or the
server going away, 1008 a protocol violation, 1009 a message over ``max_body_bytes``.

Who may connect: a browser page only from the server's own origin (``public_url``'s,
or without it the ``Host`` it came to, one it serves) or ``ws_origins`` (a
foreign ``Origin`` gets an error, status 403, and 1008); a token
only if the server issued it (401); at most ``max_websockets_per_client`` open per
client address (429). The tenant is the page's signed session cookie, else the
client address (backend/app/tenancy/identity.py). A page opened from a shared link or an embed
names it (``?link=ID``): a run of that link's code as stored runs in a process of its
own, retired after it (backend/app/trust/provenance.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, WebSocket
from pydantic import BaseModel, ValidationError

from backend.app.core.errors import ApiError, validation_body
from backend.app.core.logs import fields, get_logger
from backend.app.core.wire import (
    CLIENT_MESSAGE,
    WS_VERSION,
    ClientCancel,
    ClientHello,
    ClientRun,
    ErrorPayload,
    HelloPayload,
    RunBody,
    ServerError,
    ServerHello,
)
from backend.app.relay.stream import RunStream, server_done
from backend.app.services.container import Services, get_services
from backend.app.services.links import link_code_of
from backend.app.tenancy.admission import CLIENT_GONE
from backend.app.tenancy.caller import Caller
from backend.app.tenancy.identity import caller_for
from backend.app.trust.provenance import LINK_PARAM, LinkCode
from backend.app.web.middleware import origin_allowed
from sandbox.protocol import MAX_CODE_BYTES

router = APIRouter()
log = get_logger("ws")

CLOSE_NORMAL, CLOSE_GOING_AWAY, CLOSE_POLICY, CLOSE_TOO_BIG = 1000, 1001, 1008, 1009


@dataclass
class _Run:
    seq: int
    task: asyncio.Task[None] | None = None
    stream: RunStream | None = None

    def done(self) -> bool:
        return self.task is None or self.task.done()


#: what json.dumps(..., separators=(",", ":"), ensure_ascii=False) uses, made once
#: (json.dumps makes an encoder per call with these options)
_ENVELOPE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _event_message(seq: int, event: dict[str, Any]) -> str:
    """The envelope of an event the run service validated already (RunStream)."""
    return _ENVELOPE.encode({"type": "event", "seq": seq, "payload": event})


class _Closed(Exception):
    """The client is gone; stop."""


class Connection:
    def __init__(self, ws: WebSocket, services: Services) -> None:
        self.ws = ws
        self.s = services
        self.id = uuid.uuid4().hex[:16]
        self.caller: Caller | None = None
        #: the code of the shared link whose page opened this socket (``?link=``),
        #: read from the store at the first run: a run of it is not the caller's own
        self._link: LinkCode | None = None
        self.current: _Run | None = None
        self.run_ended = asyncio.Event()
        self._send_lock = asyncio.Lock()
        self._closed = False

    # --- sending ---------------------------------------------------------------------
    async def send(self, message: BaseModel | str) -> None:
        """Send one message; a client that takes none of it for
        ``client_stall_timeout_s`` is dropped (the server holds no more than this one
        message and the socket's buffer for it: its run waits meanwhile)."""
        text = message if isinstance(message, str) else message.model_dump_json(exclude_none=True)
        async with self._send_lock:
            if self._closed:
                raise _Closed
            try:
                async with asyncio.timeout(self.s.settings.client_stall_timeout_s):
                    await self.ws.send_text(text)
            except TimeoutError:
                self._closed = True
                log.info("ws.stalled", extra=fields(conn=self.id))
                self.run_ended.set()  # wake the loop: it ends the connection
                raise _Closed from None
            except Exception as exc:  # the client went away mid-send
                self._closed = True
                raise _Closed from exc

    async def send_error(self, seq: int, message: str, **extra: Any) -> None:
        await self.send(ServerError(seq=seq, payload=ErrorPayload(message=message, **extra)))

    async def close(self, code: int, reason: str) -> None:
        async with self._send_lock:
            if self._closed:
                return
            self._closed = True
            with contextlib.suppress(Exception):
                await self.ws.close(code, reason[:120])

    # --- the loop --------------------------------------------------------------------
    async def _refuse(self, status: int, message: str) -> None:
        """Refuse the connection in words (an error, then 1008): a browser cannot read
        the status of a refused handshake."""
        await self.ws.accept()
        with contextlib.suppress(_Closed):
            await self.send_error(-1, message, status=status)
        await self.close(CLOSE_POLICY, message)

    async def serve(self) -> None:
        origin = self.ws.headers.get("origin")
        if origin is not None and not origin_allowed(self.ws, self.s.settings, origin):
            log.info("ws.refused", extra=fields(reason="origin"))
            await self._refuse(403, f"pages from {origin[:100]} may not open this WebSocket")
            return
        try:
            self.caller = caller_for(self.ws, self.s.known_tokens, self.s.sessions)
        except ApiError as exc:
            await self._refuse(exc.status, exc.message)
            return
        if not self.s.admission.open_socket(self.caller.client):
            limit = self.s.settings.max_websockets_per_client
            await self._refuse(429, f"this address has {limit} WebSockets open already")
            return
        # Its runs' places in line are held only while it is open (admission.CLIENT_GONE).
        gone = asyncio.Event()
        token = CLIENT_GONE.set(gone)
        try:
            await self._serve()
        finally:
            gone.set()
            CLIENT_GONE.reset(token)
            self.s.admission.close_socket(self.caller.client)

    async def _serve(self) -> None:
        s = self.s.settings
        assert self.caller is not None
        await self.ws.accept()
        self.s.metrics.ws_connections.inc()
        log.info("ws.open", extra=fields(conn=self.id, client=self.caller.rate_key))
        try:
            await self.send(
                ServerHello(
                    payload=HelloPayload(
                        server=self.s.version,
                        timeouts={
                            "handshake_s": s.handshake_timeout_s,
                            "idle_s": s.idle_timeout_s,
                            "session_s": s.session_timeout_s,
                        },
                        limits={
                            "max_code_bytes": MAX_CODE_BYTES,
                            "max_message_bytes": s.max_body_bytes,
                            "max_timeout_s": s.max_timeout_s,
                        },
                    )
                )
            )
            await self._loop()
        except _Closed:
            pass
        finally:
            await self._stop_current("the connection closed")
            self._closed = True
            self.s.metrics.ws_connections.dec()
            log.info("ws.close", extra=fields(conn=self.id))

    async def _loop(self) -> None:
        s = self.s.settings
        opened = time.monotonic()
        session_end = opened + s.session_timeout_s
        last_activity = opened
        greeted = False
        receive: asyncio.Future[Any] = asyncio.ensure_future(self.ws.receive())
        try:
            while True:
                now = time.monotonic()
                busy = self.current is not None and not self.current.done()
                if not greeted:
                    deadline, why = (
                        opened + s.handshake_timeout_s,
                        f"no message within {s.handshake_timeout_s:g} s",
                    )
                elif busy:
                    deadline, why = session_end, f"session timeout {s.session_timeout_s:g} s"
                else:
                    deadline, why = (
                        last_activity + s.idle_timeout_s,
                        f"idle timeout {s.idle_timeout_s:g} s",
                    )
                if session_end < deadline:
                    deadline, why = session_end, f"session timeout {s.session_timeout_s:g} s"
                if now >= deadline:
                    await self.close(CLOSE_GOING_AWAY, why)
                    return
                self.run_ended.clear()
                ended = asyncio.ensure_future(self.run_ended.wait())
                await asyncio.wait(
                    {receive, ended}, timeout=deadline - now, return_when=asyncio.FIRST_COMPLETED
                )
                ended.cancel()
                if self._closed:  # a send found the client gone or stalled
                    return
                if self.run_ended.is_set():
                    last_activity = max(last_activity, time.monotonic())
                if not receive.done():
                    continue
                message = receive.result()
                if message["type"] == "websocket.disconnect":
                    self._closed = True
                    return
                last_activity = time.monotonic()
                greeted = True
                keep_going = await self._on_message(message)
                if not keep_going:
                    return
                receive = asyncio.ensure_future(self.ws.receive())
        finally:
            if not receive.done():
                receive.cancel()

    async def _on_message(self, message: dict[str, Any]) -> bool:
        s = self.s.settings
        raw = message.get("text")
        if raw is None and message.get("bytes") is not None:
            raw = message["bytes"].decode("utf-8", "replace")
        if raw is None:
            return True
        if len(raw.encode()) > s.max_body_bytes:
            await self.send_error(-1, f"message over {s.max_body_bytes} bytes", status=413)
            await self.close(CLOSE_TOO_BIG, "message too big")
            return False
        try:
            parsed = CLIENT_MESSAGE.validate_json(raw)
        except ValidationError as exc:
            await self._bad_message(raw, exc)
            return True
        if isinstance(parsed, ClientHello):
            if parsed.payload.version != WS_VERSION:
                await self.send_error(
                    parsed.seq,
                    f"unsupported version {parsed.payload.version}; this server speaks {WS_VERSION}",
                    status=400,
                )
                await self.close(CLOSE_POLICY, "unsupported version")
                return False
        elif isinstance(parsed, ClientRun):
            await self._start(parsed.seq, parsed.payload)
        elif isinstance(parsed, ClientCancel):
            run = self.current
            if run is not None and parsed.seq in (-1, run.seq):
                await self._cancel(run, "cancelled by the client")
        return True

    async def _bad_message(self, raw: str, exc: ValidationError) -> None:
        seq, kind = -1, None
        with contextlib.suppress(Exception):
            data = json.loads(raw)
            if isinstance(data, dict):
                kind = data.get("type")
                if isinstance(data.get("seq"), int) and not isinstance(data.get("seq"), bool):
                    seq = data["seq"]
        if kind == "run":
            # A new run cancels the previous one, even a run that fails to parse.
            await self._stop_current("replaced by a newer run")
        body = validation_body(
            exc.errors(include_url=False), skip=("run", "hello", "cancel", "payload")
        )
        await self.send_error(seq, body.message, status=body.status, field=body.field)

    # --- runs ------------------------------------------------------------------------
    async def _start(self, seq: int, body: RunBody) -> None:
        await self._stop_current(f"replaced by run {seq}")
        run = _Run(seq)
        run.task = asyncio.create_task(self._run(run, body))
        run.task.add_done_callback(lambda _: self.run_ended.set())
        self.current = run

    async def _cancel(self, run: _Run, reason: str) -> None:
        if run.stream is not None:
            await run.stream.cancel(reason)
        elif run.task is not None and not run.task.done():
            run.task.cancel()  # still waiting for admission

    async def _stop_current(self, reason: str) -> None:
        run, self.current = self.current, None
        if run is None or run.task is None or run.task.done():
            return
        await self._cancel(run, reason)
        # Wait for its done (bounded), so the pool frees the worker before the next.
        done, _ = await asyncio.wait({run.task}, timeout=self.s.settings.cancel_grace_s + 1)
        if not done:
            run.task.cancel()
            with contextlib.suppress(BaseException):
                await run.task

    async def _caller_of(self, code: str) -> Caller:
        """Who runs ``code``: the connection's caller, whose kept process it may shape
        only if it is the caller's own code, not the code of the link this socket's
        page opened as it came (backend/app/trust/provenance.py)."""
        assert self.caller is not None
        if self._link is None:
            link = self.ws.query_params.get(LINK_PARAM)
            self._link = await link_code_of(self.s, self.caller.rate_key, link)
        if self.caller.keeps_process and self._link.same_code(code):
            return dataclasses.replace(self.caller, keeps_process=False)
        return self.caller

    async def _run(self, run: _Run, body: RunBody) -> None:
        seq = run.seq
        started = time.monotonic()
        try:
            stream = await self.s.runs.start(
                body.to_request(), await self._caller_of(body.code), use_cache=body.cache
            )
        except ApiError as exc:
            with contextlib.suppress(_Closed):
                await self.send_error(
                    seq, exc.message, status=exc.status, retry_after_s=exc.retry_after_s
                )
            return
        except asyncio.CancelledError:
            # Superseded while it waited for a worker: it still ends with done.
            with contextlib.suppress(_Closed):
                done = server_done("cancelled", started, "cancelled before it started")
                await self.send(_event_message(seq, done))
            return
        run.stream = stream
        try:
            async with contextlib.aclosing(stream.events()) as events:
                async for event in events:
                    await self.send(_event_message(seq, event))
        except _Closed:
            pass
        finally:
            await stream.close()


@router.websocket("/api/v1/ws")
async def websocket(ws: WebSocket) -> None:
    await Connection(ws, get_services(ws)).serve()
