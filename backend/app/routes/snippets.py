"""``POST /api/v1/snippets`` and ``GET /api/v1/snippets/{id}``: immutable,
content-addressed run requests behind short links (backend/app/services/links.py stores
and reads them, with their limits)."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from backend.app.core.errors import ApiError
from backend.app.core.wire import ERROR_RESPONSES, ErrorBody, SnippetBody, SnippetCreated
from backend.app.services.container import ServicesDep
from backend.app.services.links import load_snippet, store_snippet
from backend.app.tenancy.identity import client_of
from sandbox.protocol import RunRequest

router = APIRouter(prefix="/api/v1", tags=["snippets"])


@router.post(
    "/snippets",
    status_code=201,
    response_model=SnippetCreated,
    responses=ERROR_RESPONSES,
)
async def create_snippet(
    body: SnippetBody, request: Request, services: ServicesDep
) -> SnippetCreated:
    """Store a request; the same content always gets the same id."""
    return await store_snippet(body, request, services)


@router.get(
    "/snippets/{snippet_id}",
    response_model=RunRequest,
    responses={
        404: {"model": ErrorBody, "description": "No snippet has this id."},
        429: ERROR_RESPONSES[429],
        503: ERROR_RESPONSES[503],
    },
)
async def get_snippet(snippet_id: str, request: Request, services: ServicesDep) -> Response:
    """The stored request, as it was stored."""
    body = await load_snippet(services, client_of(request), snippet_id)
    if body is None:
        raise ApiError(404, "not_found", f"no snippet {snippet_id!r}", field="snippet_id")
    return JSONResponse(
        json.loads(body),
        headers={"Cache-Control": "public, max-age=31536000, immutable", "ETag": f'"{snippet_id}"'},
    )
