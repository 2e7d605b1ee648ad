"""``GET /api/v1/snippets/{id}/report.md``, ``report.ipynb`` and ``report.hlo.txt``: a
bug report for JAX's issue form, made from a run of the snippet (backend/app/outside/bug_report.py
writes it).

The run is made as the caller, through ``POST /api/v1/runs`` (backend/app/web/local_api.py):
the caller's tenancy, limits and cache rules, so a report costs what a run costs and is
answered from the cache when the snippet's answer is confirmed. ``?across=V1,V2`` adds
where each output first changed, from ``POST /api/v1/across`` made the same way. The
environment (``jax.print_environment_info()``) comes from a run on a worker of the
run's JAX version, made once per version and kept by this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from backend.app.core.errors import ApiError
from backend.app.core.wire import ERROR_RESPONSES, ErrorBody
from backend.app.outside import bug_report as report_text
from backend.app.outside.repro import repro
from backend.app.services.container import Services, ServicesDep
from backend.app.services.links import load_snippet, snippet_url
from backend.app.tenancy.caller import Caller
from backend.app.tenancy.identity import client_of
from backend.app.web.local_api import LocalApi
from sandbox.protocol import RunRequest

router = APIRouter(prefix="/api/v1", tags=["snippets"])

#: what a worker runs to describe itself (stdout events); its value is nothing
ENVIRONMENT_CODE = "import jax\n\njax.print_environment_info()\n\n\ndef f():\n    return 0\n"
#: the server's own identity for the environment runs (like the start-up probe)
ENVIRONMENT_CALLER = Caller("server:report", "server:report")
_ENVIRONMENTS = "report_environments"

AcrossQuery = Annotated[
    str | None,
    Query(
        max_length=400,
        description="JAX versions, comma-separated: add where each output first changed "
        "across them (an across-versions run, as `POST /api/v1/across`).",
    ),
]


async def _snippet(services: Services, request: Request, snippet_id: str) -> RunRequest:
    body = await load_snippet(services, client_of(request), snippet_id)
    if body is None:
        raise ApiError(404, "not_found", f"no snippet {snippet_id!r}", field="snippet_id")
    return RunRequest.model_validate(json.loads(body))


def _forward(response: Any) -> None:
    """A REST refusal (429, 503, 422...) as this route's own, retry-after included."""
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = {}
    raise ApiError(
        response.status_code,
        str(body.get("error", "run_failed")),
        str(body.get("message", "the report's run failed")),
        field=body.get("field"),
        retry_after_s=body.get("retry_after_s"),
    )


async def _run(api: LocalApi, request: RunRequest) -> list[dict[str, Any]]:
    outputs = list(dict.fromkeys([*request.outputs, "value", "hlo"]))
    body = json.loads(request.model_dump_json(exclude_none=True))
    response = await api.call("POST", "/api/v1/runs", json={**body, "outputs": outputs})
    _forward(response)
    events: list[dict[str, Any]] = response.json()["events"]
    return events


async def environment(services: Services, jax_version: str | None) -> str:
    """``jax.print_environment_info()`` from a worker of ``jax_version``, kept once made."""
    kept: dict[str, str] = services.extra.setdefault(_ENVIRONMENTS, {})
    key = jax_version or "default"
    if key in kept:
        return kept[key]
    request = RunRequest.model_validate(
        {"code": ENVIRONMENT_CODE, "outputs": ["value"], "jax_version": jax_version}
    )
    try:
        stream = await services.runs.start(request, ENVIRONMENT_CALLER, use_cache=False)
        async with contextlib.aclosing(stream.events()) as events:
            seen = [event async for event in events]
    except ApiError as exc:
        return f"not available now: {exc.message}"
    text = "".join(e.get("text", "") for e in seen if e.get("type") == "stdout")
    done = seen[-1] if seen else {}
    if done.get("status") != "ok" or not text.strip():
        return f"not available: the worker's run ended {done.get('status')}: {done.get('reason')}"
    kept[key] = text
    return text


async def _changes(
    api: LocalApi, request: RunRequest, versions: list[str]
) -> list[tuple[str, str, str]]:
    base = json.loads(request.model_dump_json(exclude_none=True))
    base.pop("jax_version", None)
    response = await api.call(
        "POST", "/api/v1/across", json={"request": base, "versions": versions}
    )
    _forward(response)
    return [
        (c["output"], c["pipeline"], c["first_changed"])
        for c in response.json()["outputs"]
        if c.get("first_changed")
    ]


async def gather(
    request: Request, services: Services, snippet_id: str, across: str | None
) -> report_text.ReportFacts:
    stored = await _snippet(services, request, snippet_id)
    versions = [v.strip() for v in (across or "").split(",") if v.strip()]
    api = LocalApi(request.scope["app"], request)
    events = await _run(api, stored)
    accepted = next((e for e in events if e.get("type") == "accepted"), {})
    worker: dict[str, Any] = accepted.get("worker") or {}
    main = [e for e in events if e.get("pipeline", "main") == "main"]
    value = next((e["repr"] for e in main if e.get("type") == "value"), None)
    error = next((e for e in main if e.get("type") == "error"), None)
    shown = value if value is not None else (
        f"{error['kind']}: {error['message']}" if error else "no value"
    )  # fmt: skip
    env, changes = await asyncio.gather(
        environment(services, worker.get("jax_version") or stored.jax_version),
        _changes(api, stored, versions) if versions else asyncio.sleep(0, []),
    )
    link = snippet_url(request, services.settings.public_url, snippet_id)
    return report_text.ReportFacts(
        snippet_id=snippet_id,
        link=link,
        request=stored,
        repro=repro(stored),
        status=str(events[-1].get("status", "error")) if events else "error",
        shown=shown,
        worker=worker,
        stdout="".join(e.get("text", "") for e in main if e.get("type") == "stdout"),
        hlo=next((e["text"] for e in main if e.get("type") == "hlo"), None),
        hlo_link=link.replace("/s/", "/api/v1/snippets/") + "/report.hlo.txt",
        hlo_chars=services.settings.report_hlo_chars,
        environment=env,
        changes=changes,
        across_versions=versions,
    )


_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No snippet has this id."},
    **ERROR_RESPONSES,
}


def _answers(media_type: str, what: str) -> dict[int | str, dict[str, Any]]:
    return {200: {"description": what, "content": {media_type: {"schema": {"type": "string"}}}},
            **_ERRORS}  # fmt: skip


@router.get(
    "/snippets/{snippet_id}/report.md",
    response_class=Response,
    responses=_answers("text/markdown", "The report, as Markdown."),
)
async def report_markdown(
    snippet_id: str, request: Request, services: ServicesDep, across: AcrossQuery = None
) -> Response:
    """A bug report for JAX's issue form, as Markdown: description, a repro that plain
    JAX runs, what the run printed, where it first changed, config, environment, HLO."""
    facts = await gather(request, services, snippet_id, across)
    return Response(
        report_text.markdown(facts),
        media_type="text/markdown; charset=utf-8",
        headers={"Cache-Control": "no-store"},
    )


@router.get(
    "/snippets/{snippet_id}/report.ipynb",
    response_class=Response,
    responses=_answers("application/x-ipynb+json", "The report, as a notebook (nbformat v4)."),
)
async def report_notebook(
    snippet_id: str, request: Request, services: ServicesDep, across: AcrossQuery = None
) -> Response:
    """The same report as a notebook (nbformat v4): the repro is its code cell."""
    facts = await gather(request, services, snippet_id, across)
    return Response(
        report_text.notebook(facts),
        media_type="application/x-ipynb+json",
        headers={
            "Cache-Control": "no-store",
            "Content-Disposition": f'attachment; filename="jaxplay-{snippet_id}.ipynb"',
        },
    )


@router.get(
    "/snippets/{snippet_id}/report.hlo.txt",
    response_class=Response,
    responses=_answers("text/plain", "The run's optimised HLO, whole."),
)
async def report_hlo(snippet_id: str, request: Request, services: ServicesDep) -> Response:
    """The run's optimised HLO, whole: the report's attachment."""
    stored = await _snippet(services, request, snippet_id)
    events = await _run(LocalApi(request.scope["app"], request), stored)
    hlo = next((e["text"] for e in events if e.get("type") == "hlo"
                and e.get("pipeline", "main") == "main"), None)  # fmt: skip
    if hlo is None:
        raise ApiError(422, "no_hlo", "the snippet's run made no HLO (it did not compile)")
    return Response(
        hlo,
        media_type="text/plain; charset=utf-8",
        headers={
            "Cache-Control": "no-store",
            "Content-Disposition": f'attachment; filename="jaxplay-{snippet_id}.hlo.txt"',
        },
    )
