"""``POST /api/v1/runs``: a run, answered as JSON when done or streamed as NDJSON."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from backend.app.logs import fields, get_logger
from backend.app.runs import RunStream
from backend.app.services import ServicesDep
from backend.app.tenancy import caller_for
from backend.app.wire import ERROR_RESPONSES, RunBody, RunResult

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


def _dumps(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


class _ClientStalled(Exception):
    """The client took nothing for ``client_stall_timeout_s``."""


class _RunStreamResponse(StreamingResponse):
    """Streams a run; gives the run's place back even if the client left first. A
    client that stops reading holds up its own run (the server buffers no more than
    the line being sent) and is dropped after ``stall_s``."""

    def __init__(self, stream: RunStream, stall_s: float) -> None:
        self._stream = stream
        self._stall_s = stall_s
        self._body = self._lines()
        super().__init__(
            self._body,
            media_type=NDJSON,
            headers={
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
                "X-Run-Id": stream.run_id,
            },
        )

    async def _lines(self) -> AsyncGenerator[str, None]:
        async with contextlib.aclosing(self._stream.events()) as events:
            async for event in events:
                yield _dumps(event) + "\n"

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


async def _collect(stream: RunStream, request: Request) -> list[dict[str, Any]]:
    async def watch() -> None:
        # After the body, the next message is the client going away.
        message = await request.receive()
        if message["type"] == "http.disconnect":
            await stream.cancel("the client went away")

    watcher = asyncio.create_task(watch())
    try:
        async with contextlib.aclosing(stream.events()) as events:
            return [event async for event in events]
    finally:
        watcher.cancel()
        await stream.close()


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
    if NDJSON in request.headers.get("accept", ""):
        return _RunStreamResponse(stream, services.settings.client_stall_timeout_s)
    events = await _collect(stream, request)
    return JSONResponse(
        {"events": events}, headers={"Cache-Control": "no-store", "X-Run-Id": stream.run_id}
    )
