"""The page (``/``) and shared links (``/s/{id}``)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from backend.app.page import not_found_html, page_html
from backend.app.routes.snippets import load_snippet
from backend.app.services import ServicesDep
from backend.app.wire import ERROR_RESPONSES

router = APIRouter(tags=["page"])

_HTML = {"content": {"text/html": {"schema": {"type": "string"}}}}


@router.get("/", response_class=HTMLResponse, responses={200: _HTML})
async def index(services: ServicesDep) -> HTMLResponse:
    """The playground page."""
    return HTMLResponse(page_html(services.settings.frontend_dist))


@router.get(
    "/s/{snippet_id}",
    response_class=HTMLResponse,
    responses={
        200: _HTML,
        404: {"description": "No snippet has this id.", **_HTML},
        503: ERROR_RESPONSES[503],
    },
)
async def shared(snippet_id: str, services: ServicesDep) -> HTMLResponse:
    """The playground page with a snippet loaded."""
    body = await load_snippet(services, snippet_id)
    if body is None:
        return HTMLResponse(not_found_html(snippet_id), status_code=404)
    return HTMLResponse(page_html(services.settings.frontend_dist, body))
