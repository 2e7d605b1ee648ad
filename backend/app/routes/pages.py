"""The page (``/``), shared links (``/s/{id}``) and the embed view (``/e/{id}``).

Each answer carries the page's Content-Security-Policy (backend/app/page.py) and,
for a browser that has none yet (or one that no longer verifies), a fresh signed
session cookie: its tenant (backend/app/tenancy.py).
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from backend.app.errors import Overloaded
from backend.app.page import busy_html, not_found_html, page_csp, page_html
from backend.app.routes.snippets import load_snippet
from backend.app.services import Services, ServicesDep
from backend.app.tenancy import SESSION_COOKIE, client_of
from backend.app.wire import ERROR_RESPONSES

router = APIRouter(tags=["page"])

_HTML: dict[str, Any] = {"content": {"text/html": {"schema": {"type": "string"}}}}


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


_SNIPPET_PAGE: dict[int | str, dict[str, Any]] = {
    200: _HTML,
    404: {"description": "No snippet has this id.", **_HTML},
    429: {"description": "Too many lookups of snippets that do not exist.", **_HTML},
    503: ERROR_RESPONSES[503],
}


async def _snippet_page(
    request: Request, services: Services, snippet_id: str, frame_ancestors: str | None = None
) -> HTMLResponse:
    """The page with the snippet, or a page that says why not (a person at a browser
    gets words, not JSON: 404, or 429 for a client that missed too often)."""
    try:
        body = await load_snippet(services, client_of(request), snippet_id)
    except Overloaded as exc:
        html = busy_html(exc.message)
        response = _page(request, services, html, 429, frame_ancestors=frame_ancestors)
        response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s or 1)))
        return response
    if body is None:
        html = not_found_html(snippet_id)
        return _page(request, services, html, 404, frame_ancestors=frame_ancestors)
    html = page_html(services.settings.frontend_dist, body)
    return _page(request, services, html, frame_ancestors=frame_ancestors)


@router.get("/s/{snippet_id}", response_class=HTMLResponse, responses=_SNIPPET_PAGE)
async def shared(snippet_id: str, request: Request, services: ServicesDep) -> HTMLResponse:
    """The playground page with a snippet loaded."""
    return await _snippet_page(request, services, snippet_id)


@router.get("/e/{snippet_id}", response_class=HTMLResponse, responses=_SNIPPET_PAGE)
async def embedded(snippet_id: str, request: Request, services: ServicesDep) -> HTMLResponse:
    """A snippet and its outputs, read-only and compact, for an iframe in docs and
    tutorials (the page tells the view by its path). The sites that may frame it are
    the setting `embed_frame_ancestors`."""
    return await _snippet_page(
        request, services, snippet_id, services.settings.embed_frame_ancestors
    )
