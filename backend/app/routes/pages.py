"""The page (``/``), shared links (``/s/{id}``) and the embed view (``/e/{id}``).

Each answer carries the page's Content-Security-Policy (backend/app/page.py) and,
for a browser that has none yet (or one that no longer verifies), a fresh signed
session cookie: its tenant (backend/app/tenancy.py).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from backend.app.page import not_found_html, page_csp, page_html
from backend.app.routes.snippets import load_snippet
from backend.app.services import Services, ServicesDep
from backend.app.tenancy import SESSION_COOKIE, client_of
from backend.app.wire import ERROR_RESPONSES

router = APIRouter(tags=["page"])

_HTML = {"content": {"text/html": {"schema": {"type": "string"}}}}


def _page(
    request: Request,
    services: Services,
    html: str,
    status: int = 200,
    *,
    frame_ancestors: str | None = None,
) -> HTMLResponse:
    s = services.settings
    ancestors = s.frame_ancestors if frame_ancestors is None else frame_ancestors
    response = HTMLResponse(
        html,
        status_code=status,
        headers={"Content-Security-Policy": page_csp(s.frontend_dist, ancestors)},
    )
    sessions = services.sessions
    if sessions.verify(request.cookies.get(SESSION_COOKIE)) is None:
        response.set_cookie(
            SESSION_COOKIE,
            sessions.issue(),
            max_age=int(sessions.max_age_s),
            httponly=True,
            samesite="lax",
            secure=sessions.secure,
        )
    return response


@router.get("/", response_class=HTMLResponse, responses={200: _HTML})
async def index(request: Request, services: ServicesDep) -> HTMLResponse:
    """The playground page."""
    return _page(request, services, page_html(services.settings.frontend_dist))


@router.get(
    "/s/{snippet_id}",
    response_class=HTMLResponse,
    responses={
        200: _HTML,
        404: {"description": "No snippet has this id.", **_HTML},
        429: ERROR_RESPONSES[429],
        503: ERROR_RESPONSES[503],
    },
)
async def shared(snippet_id: str, request: Request, services: ServicesDep) -> HTMLResponse:
    """The playground page with a snippet loaded."""
    body = await load_snippet(services, client_of(request), snippet_id)
    if body is None:
        return _page(request, services, not_found_html(snippet_id), status=404)
    return _page(request, services, page_html(services.settings.frontend_dist, body))


@router.get(
    "/e/{snippet_id}",
    response_class=HTMLResponse,
    responses={
        200: _HTML,
        404: {"description": "No snippet has this id.", **_HTML},
        429: ERROR_RESPONSES[429],
        503: ERROR_RESPONSES[503],
    },
)
async def embedded(snippet_id: str, request: Request, services: ServicesDep) -> HTMLResponse:
    """A snippet and its outputs, read-only and compact, for an iframe in docs and
    tutorials (the page tells the view by its path). The sites that may frame it are
    the setting `embed_frame_ancestors`."""
    ancestors = services.settings.embed_frame_ancestors
    body = await load_snippet(services, client_of(request), snippet_id)
    if body is None:
        html = not_found_html(snippet_id)
        return _page(request, services, html, status=404, frame_ancestors=ancestors)
    html = page_html(services.settings.frontend_dist, body)
    return _page(request, services, html, frame_ancestors=ancestors)
