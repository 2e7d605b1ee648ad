"""Snippets: immutable, content-addressed run requests behind short links."""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from backend.app.errors import ApiError, log_internal
from backend.app.services import ServicesDep
from backend.app.storage import canonical_json, snippet_digest
from backend.app.wire import ERROR_RESPONSES, ErrorBody, SnippetBody, SnippetCreated
from sandbox.protocol import RunRequest

router = APIRouter(prefix="/api/v1", tags=["snippets"])

SNIPPET_ID = re.compile(r"^[a-z2-7]{8,52}$")


def snippet_url(request: Request, public_url: str | None, snippet_id: str) -> str:
    base = public_url.rstrip("/") if public_url else str(request.base_url).rstrip("/")
    return f"{base}/s/{snippet_id}"


async def load_snippet(services: Any, snippet_id: str) -> str | None:
    """The stored request's canonical JSON, or None for an unknown id."""
    if not SNIPPET_ID.match(snippet_id):
        return None
    try:
        body: str | None = await services.storage.get_snippet(snippet_id)
    except Exception as exc:
        log_internal("storage.get_snippet", exc)
        raise ApiError(
            503, "storage_unavailable", "the snippet store failed; try again", retry_after_s=5
        )
    return body


@router.post(
    "/snippets",
    status_code=201,
    response_model=SnippetCreated,
    responses={k: v for k, v in ERROR_RESPONSES.items() if k != 429},
)
async def create_snippet(
    body: SnippetBody, request: Request, services: ServicesDep
) -> SnippetCreated:
    """Store a request; the same content always gets the same id."""
    canonical = canonical_json(body.to_request())
    try:
        snippet_id = await services.storage.put_snippet(snippet_digest(canonical), canonical)
    except Exception as exc:
        log_internal("storage.put_snippet", exc)
        raise ApiError(
            503, "storage_unavailable", "the snippet store failed; try again", retry_after_s=5
        )
    return SnippetCreated(
        id=snippet_id, url=snippet_url(request, services.settings.public_url, snippet_id)
    )


@router.get(
    "/snippets/{snippet_id}",
    response_model=RunRequest,
    responses={
        404: {"model": ErrorBody, "description": "No snippet has this id."},
        503: ERROR_RESPONSES[503],
    },
)
async def get_snippet(snippet_id: str, services: ServicesDep) -> Response:
    """The stored request, as it was stored."""
    body = await load_snippet(services, snippet_id)
    if body is None:
        raise ApiError(404, "not_found", f"no snippet {snippet_id!r}", field="snippet_id")
    return JSONResponse(
        json.loads(body),
        headers={"Cache-Control": "public, max-age=31536000, immutable", "ETag": f'"{snippet_id}"'},
    )
