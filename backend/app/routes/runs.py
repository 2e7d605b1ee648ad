"""``POST /api/v1/runs``: a run, answered as JSON when done or streamed as NDJSON."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from backend.app.core.logs import fields, get_logger
from backend.app.core.wire import ERROR_RESPONSES, RunBody, RunResult
from backend.app.relay.stream import RunStream
from backend.app.services.container import ServicesDep
from backend.app.tenancy.identity import caller_for
from backend.app.trust.cache import approx_size

router = APIRouter(prefix="/api/v1", tags=["runs"])
log = get_logger("runs")

NDJSON = "application/x-ndjson"

_RUN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The run's events: a JSON object when done, or with "
        "`Accept: application/x-ndjson` one event per line as they happen.",
        "content": {
            NDJSON: {"schema": {"type": "string", "description": "One JSON event per line."}}
        },
    },
    **ERROR_RESPONSES,
}


#: events whose JSON is likely over this many bytes are encoded off the event loop
THREAD_ENCODE_BYTES = 64 * 1024


def _dumps(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


async def _encode(event: dict[str, Any]) -> str:
    """An event's JSON; a large one (an IR text of megabytes) in a worker thread, so
    that the event loop (every other client's events) does not wait for it."""
    if approx_size(event, THREAD_ENCODE_BYTES) > THREAD_ENCODE_BYTES:
        return await asyncio.to_thread(_dumps, event)
    return _dumps(event)


class _ClientStalled(Exception):
    """The client took nothing for ``client_stall_timeout_s``."""


class _RunStreamResponse(StreamingResponse):
    """Streams a run, as NDJSON (one event a line) or as the JSON answer
    ``{"events": [...]}`` written event by event (``whole``): either way the server
    holds no more than the event being sent, never the run's whole list (up to its
    64 MiB), and encodes a large event off the event loop. Gives the run's place back
    even if the client left first. A client that stops reading holds up its own run
    and is dropped after ``stall_s``."""

    def __init__(self, stream: RunStream, stall_s: float, *, whole: bool = False) -> None:
        self._stream = stream
        self._stall_s = stall_s
        self._body = self._object() if whole else self._lines()
        headers = {"Cache-Control": "no-store", "X-Run-Id": stream.run_id}
        if not whole:
            headers["X-Accel-Buffering"] = "no"
        super().__init__(
            self._body, media_type="application/json" if whole else NDJSON, headers=headers
        )

    async def _lines(self) -> AsyncGenerator[str, None]:
        async with contextlib.aclosing(self._stream.events()) as events:
            async for event in events:
                yield await _encode(event) + "\n"

    async def _object(self) -> AsyncGenerator[str, None]:
        """``{"events":[e1,e2,...]}``, one event a chunk. Every refusal (429, 503) came
        before (``RunService.start``), and the run's events end with its ``done``
        whatever happens: the answer's status is 200 and its body complete."""
        separator = '{"events":['
        async with contextlib.aclosing(self._stream.events()) as events:
            async for event in events:
                yield separator + await _encode(event)
                separator = ","
        yield ('{"events":[' if separator != "," else "") + "]}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_or_stall(message: Message) -> None:
            try:
                async with asyncio.timeout(self._stall_s):
                    await send(message)
            except TimeoutError:
                raise _ClientStalled from None

        try:
            await super().__call__(scope, receive, send_or_stall)
        except _ClientStalled:
            log.info("http.stalled", extra=fields(run_id=self._stream.run_id))
        finally:
            await self._body.aclose()  # ends the run's stream, so the pool sees it end
            await self._stream.close()


@router.post("/runs", response_model=RunResult, responses=_RUN_RESPONSES)
async def create_run(
    body: RunBody,
    request: Request,
    services: ServicesDep,
    cache: Annotated[
        bool, Query(description="`false`: run the code even if a cached result exists.")
    ] = True,
) -> Response:
    """Run a request (SPEC §1) and answer its events (SPEC §2)."""
    caller = caller_for(request, services.known_tokens, services.sessions)
    stream = await services.runs.start(body.to_request(), caller, use_cache=body.cache and cache)
    whole = NDJSON not in request.headers.get("accept", "")
    return _RunStreamResponse(stream, services.settings.client_stall_timeout_s, whole=whole)
