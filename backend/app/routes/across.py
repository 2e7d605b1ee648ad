"""``POST /api/v1/across``: one request on several JAX versions, and where each output
changed (backend/app/relay/compare.py compares; docs/api.md, "Across versions").

The versions run one after the other; the diffs are made in a child process, off the
event loop, under the ``across_diff_chars`` and ``across_diff_s`` budget. When the
client goes away, the run in progress is cancelled, no later version starts and the
diff process is killed."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from backend.app.core.errors import ApiError
from backend.app.core.wire import ERROR_RESPONSES, AcrossBody
from backend.app.relay.compare import VersionRun, diff_off_loop, summarize, times
from backend.app.relay.stream import RunStream
from backend.app.services.container import ServicesDep
from backend.app.services.links import link_code_of
from backend.app.tenancy.identity import caller_for
from backend.app.trust.provenance import LINK_PARAM
from sandbox.environments.versions import version_key

router = APIRouter(prefix="/api/v1", tags=["runs"])


class VersionOutcome(BaseModel):
    version: str
    status: str = Field(description="The run's `done` status.")
    reason: str = ""
    jax_version: str | None = Field(description="What the worker reported it ran.")
    errors: dict[str, str] = Field(description="Pipeline -> the error that stopped it.")


class OutputChange(BaseModel):
    output: str = Field(description="`jaxpr`, `stablehlo`, `hlo`, `value` or `cost`.")
    pipeline: str
    first_changed: str | None = Field(
        description="The first version whose output differs from the version before it."
    )
    changes: list[dict[str, str]] = Field(
        description="Every step where it changed: `from`, `to` and the unified `diff`."
    )
    missing: list[str] = Field(description="Versions that did not produce it.")


class AcrossAnswer(BaseModel):
    versions: list[VersionOutcome]
    outputs: list[OutputChange]
    times: list[dict[str, Any]] = Field(
        description="Per version: `trace_ms`, `lower_ms`, `compile_ms`, `execute_ms` and "
        "`median_ms` (timing row label -> median ms per call)."
    )


#: the status logged for an answer nobody reads: its client went away (nginx's)
CLIENT_GONE = 499


@router.post("/across", response_model=AcrossAnswer, responses=ERROR_RESPONSES)
async def across(
    body: AcrossBody, request: Request, services: ServicesDep
) -> AcrossAnswer | Response:
    """Run one request on each of `versions` (oldest first, one after the other) and
    say, per output, where it changed, with the diff at each step."""
    base = body.request.to_request()
    if base.jax_version is not None:
        raise ApiError(
            422, "invalid_request", "name the versions in `versions`", field="request.jax_version"
        )
    for i, version in enumerate(body.versions):
        try:  # every version runnable, before any runs
            services.runs.prepare(base.model_copy(update={"jax_version": version}))
        except ApiError as exc:
            raise ApiError(exc.status, exc.error, exc.message, field=f"versions.{i}")
    oldest_first = sorted(body.versions, key=version_key)
    per_version = [base.model_copy(update={"jax_version": v}) for v in oldest_first]
    caller = caller_for(request, services.known_tokens, services.sessions)
    # a shared link's page (``?link=ID``): its code as stored is not the caller's own
    link = await link_code_of(services, caller.rate_key, request.query_params.get(LINK_PARAM))
    if caller.keeps_process and link.same_code(base.code):
        caller = dataclasses.replace(caller, keeps_process=False)
    gone = asyncio.Event()
    current: list[RunStream] = []

    async def watch() -> None:
        # After the body, the next message is the client going away.
        message = await request.receive()
        if message["type"] == "http.disconnect":
            gone.set()
            for stream in current:
                await stream.cancel("the client went away")

    watcher = asyncio.create_task(watch())
    runs: list[VersionRun] = []
    try:
        for version, run_request in zip(oldest_first, per_version, strict=True):
            if gone.is_set():
                return Response(status_code=CLIENT_GONE)
            starting = asyncio.ensure_future(
                services.runs.start(run_request, caller, use_cache=body.request.cache)
            )
            leaving = asyncio.ensure_future(gone.wait())
            try:  # a run waiting for its place stops waiting when the client leaves
                await asyncio.wait({starting, leaving}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                leaving.cancel()
                if not starting.done():
                    starting.cancel()
                    await asyncio.gather(starting, return_exceptions=True)
            if starting.cancelled():
                return Response(status_code=CLIENT_GONE)
            stream = starting.result()
            current[:] = [stream]
            try:
                if gone.is_set():  # it left while this run was admitted
                    await stream.cancel("the client went away")
                async with contextlib.aclosing(stream.events()) as events:
                    runs.append(summarize(version, [event async for event in events]))
            finally:
                current.clear()
                await stream.close()
        settings = services.settings
        outputs = await diff_off_loop(
            runs, max_chars=settings.across_diff_chars, time_s=settings.across_diff_s, gone=gone
        )
        if outputs is None or gone.is_set():
            return Response(status_code=CLIENT_GONE)
    finally:
        watcher.cancel()
    return AcrossAnswer(
        versions=[
            VersionOutcome(
                version=r.version,
                status=r.status,
                reason=r.reason,
                jax_version=r.jax_version,
                errors=r.errors,
            )
            for r in runs
        ],
        outputs=[OutputChange(**c) for c in outputs],
        times=times(runs),
    )
