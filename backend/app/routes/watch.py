"""``GET /api/v1/runs/{run_id}/events``: follow a run that any replica started.

With remote workers (``queue_url``) a run's events live in Redis, so every replica
can replay them from the first and follow them to ``done``, whichever replica the
run was submitted through (its id is the ``X-Run-Id`` header and the ``run_id`` of
``accepted``). The run id is the capability: 128 random bits, shown only to the one
who started it. Local pools keep no shared record of runs: 404.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from backend.app.core.errors import ApiError, log_internal
from backend.app.core.wire import ERROR_RESPONSES, ErrorBody
from backend.app.services.container import ServicesDep
from sandbox.pool.base import WatchesRuns

router = APIRouter(prefix="/api/v1", tags=["runs"])

NDJSON = "application/x-ndjson"


@router.get(
    "/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "The run's events from the first, one JSON object a line, "
            "as they happen; `done` is last.",
            "content": {NDJSON: {"schema": {"type": "string"}}},
        },
        404: {"model": ErrorBody, "description": "No such run (or its events expired)."},
        503: ERROR_RESPONSES[503],
    },
)
async def watch_run(run_id: str, services: ServicesDep) -> StreamingResponse:
    """Replay and follow a run's events (remote workers only; see docs/deploy.md)."""
    pool = services.pool
    if not isinstance(pool, WatchesRuns):
        raise ApiError(
            404, "not_found", "this server's pool keeps no shared record of runs", field="run_id"
        )
    try:
        handle = await pool.watch(run_id)
    except Exception as exc:
        log_internal("pool.watch", exc)
        raise ApiError(503, "pool_unavailable", "the run queue failed; try again", retry_after_s=5)
    if handle is None:
        raise ApiError(
            404, "not_found", f"no run {run_id!r} (or its events expired)", field="run_id"
        )

    async def lines() -> AsyncIterator[str]:
        events: Any = handle.events()
        async with contextlib.aclosing(events):
            async for event in events:
                yield json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n"

    return StreamingResponse(
        lines(),
        media_type=NDJSON,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", "X-Run-Id": run_id},
    )
