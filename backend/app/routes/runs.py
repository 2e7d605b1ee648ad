"""``POST /api/v1/runs``: a run, answered as JSON when done or streamed as NDJSON."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from backend.app.runs import RunStream
from backend.app.services import ServicesDep
from backend.app.tenancy import caller_for
from backend.app.wire import ERROR_RESPONSES, RunBody, RunResult

router = APIRouter(prefix="/api/v1", tags=["runs"])

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


class _RunStreamResponse(StreamingResponse):
    """Streams a run; gives the run's place back even if the client left first."""

    def __init__(self, stream: RunStream) -> None:
        self._stream = stream
        super().__init__(
            self._lines(),
            media_type=NDJSON,
            headers={
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
                "X-Run-Id": stream.run_id,
            },
        )

    async def _lines(self) -> AsyncIterator[str]:
        async with contextlib.aclosing(self._stream.events()) as events:
            async for event in events:
                yield _dumps(event) + "\n"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
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
        return _RunStreamResponse(stream)
    events = await _collect(stream, request)
    return JSONResponse(
        {"events": events}, headers={"Cache-Control": "no-store", "X-Run-Id": stream.run_id}
    )
