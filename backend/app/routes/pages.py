"""The page (``/``), shared links (``/s/{id}``) and the embed view (``/e/{id}``).

Each answer carries the page's Content-Security-Policy (backend/app/web/page.py) and,
for a browser that has none yet (or one that no longer verifies), a fresh signed
session cookie: its tenant (backend/app/tenancy/identity.py). A page is ``Cache-Control:
no-cache`` with a (weak) ``ETag`` of its bytes: a repeat visit to the same page costs
a ``304``; ``private`` too when it sets the cookie.

A shared link (``/s/{id}``, ``/e/{id}``) whose request the result cache holds a
confirmed answer for, one ``ResultCache.lookup`` would serve this reader, opens with
it: the page carries the events a run over the WebSocket would replay
(``initial_answer``). Nothing runs to make a page: a lookup, or nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from backend.app.core.errors import ApiError, Overloaded
from backend.app.core.logs import fields, get_logger
from backend.app.core.wire import ERROR_RESPONSES
from backend.app.relay.stream import server_done
from backend.app.services.container import Services, ServicesDep
from backend.app.services.links import load_snippet
from backend.app.tenancy.identity import SESSION_COOKIE, caller_for, client_of
from backend.app.web.page import (
    busy_html,
    not_found_html,
    page_csp,
    page_html,
    tour_not_found_html,
)
from sandbox.protocol import RunRequest

log = get_logger("pages")

router = APIRouter(tags=["page"])

_HTML: dict[str, Any] = {"content": {"text/html": {"schema": {"type": "string"}}}}


def _page(
    request: Request,
    services: Services,
    html: str,
    status: int = 200,
    *,
    frame_ancestors: str | None = None,
) -> Response:
    s = services.settings
    ancestors = s.frame_ancestors if frame_ancestors is None else frame_ancestors
    headers = {
        "Content-Security-Policy": page_csp(s.frontend_dist, ancestors),
        "Cache-Control": "no-cache",
        "Vary": "Accept-Encoding",
    }
    response: Response = HTMLResponse(html, status_code=status, headers=headers)
    if status == 200:
        # Weak: the bytes on the wire differ by encoding (backend/app/web/compression.py).
        etag = f'W/"{hashlib.sha256(response.body).hexdigest()[:32]}"'
        response.headers["ETag"] = etag
        if _matches(request.headers.get("if-none-match"), etag):
            response = Response(status_code=304, headers={**headers, "ETag": etag})
    sessions = services.sessions
    if sessions.verify(request.cookies.get(SESSION_COOKIE)) is None:
        response.headers["Cache-Control"] = "no-cache, private"  # a cookie of its own
        response.set_cookie(
            SESSION_COOKIE,
            sessions.issue(),
            max_age=int(sessions.max_age_s),
            httponly=True,
            samesite="lax",
            secure=sessions.secure,
        )
    return response


def _matches(if_none_match: str | None, etag: str) -> bool:
    """``If-None-Match`` names ``etag`` (weak comparison, as for a GET)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    bare = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == bare for tag in if_none_match.split(","))


async def initial_answer(
    request: Request, services: Services, snippet_id: str, body: str
) -> dict[str, Any] | None:
    """What the page of snippet ``body`` opens with: the confirmed answer the result
    cache would serve this reader's run of it, as the WebSocket would replay it
    (``accepted`` with ``cached: true`` first, a ``done`` with ``cached: true`` last),
    or None. A lookup only: nothing runs, nothing waits for a run. ``pending``: the
    outputs asked for that no cache keeps (``timing``), which a run brings."""
    started = time.monotonic()
    cache = services.cache
    if not cache.enabled:
        return None
    try:
        asked = RunRequest.model_validate_json(body)
        prepared = services.runs.prepare(asked)  # as a run of it would be keyed
        tenant = caller_for(request, services.known_tokens, services.sessions).tenant
    except (ApiError, ValidationError):
        return None
    _state, hit = await cache.lookup(prepared, tenant)
    if hit is None:
        return None
    events = hit.replay(uuid.uuid4().hex)
    done = server_done("ok", started, cached=True)
    log.info("page.initial", extra=fields(snippet_id=snippet_id, events=len(events) + 1))
    return {
        "snippet_id": snippet_id,
        "request": json.loads(body),
        "events": [*events, done],
        "pending": [o for o in prepared.outputs if o == "timing"],
    }


@router.get("/", response_class=HTMLResponse, responses={200: _HTML})
async def index(request: Request, services: ServicesDep) -> Response:
    """The playground page."""
    return _page(request, services, page_html(services.settings.frontend_dist))


#: a tour step as a link names it: its number (1-based) or its id (tour/tour.json). The
#: server does not hold the catalogue (it is built into the page's bundle), so the page
#: says when a well-formed name is no step of its tour.
TOUR_STEP = re.compile(r"[1-9][0-9]?|[a-z][a-z0-9-]{0,39}")


@router.get("/tour", response_class=HTMLResponse, responses={200: _HTML})
async def tour(request: Request, services: ServicesDep) -> Response:
    """The playground page, open on the tour of JAX (issue 53)."""
    return _page(request, services, page_html(services.settings.frontend_dist))


@router.get(
    "/tour/{step}",
    response_class=HTMLResponse,
    responses={200: _HTML, 404: {"description": "Not a tour step's name.", **_HTML}},
)
async def tour_step(step: str, request: Request, services: ServicesDep) -> Response:
    """The playground page, open on one step of the tour (`/tour/3`, `/tour/grad`)."""
    if TOUR_STEP.fullmatch(step) is None:
        return _page(request, services, tour_not_found_html(step), 404)
    return _page(request, services, page_html(services.settings.frontend_dist))


_SNIPPET_PAGE: dict[int | str, dict[str, Any]] = {
    200: _HTML,
    404: {"description": "No snippet has this id.", **_HTML},
    429: {"description": "Too many lookups of snippets that do not exist.", **_HTML},
    503: ERROR_RESPONSES[503],
}


async def _snippet_page(
    request: Request, services: Services, snippet_id: str, frame_ancestors: str | None = None
) -> Response:
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
    initial = await initial_answer(request, services, snippet_id, body)
    html = page_html(services.settings.frontend_dist, body, initial)
    return _page(request, services, html, frame_ancestors=frame_ancestors)


@router.get("/s/{snippet_id}", response_class=HTMLResponse, responses=_SNIPPET_PAGE)
async def shared(snippet_id: str, request: Request, services: ServicesDep) -> Response:
    """The playground page with a snippet loaded."""
    return await _snippet_page(request, services, snippet_id)


@router.get("/e/{snippet_id}", response_class=HTMLResponse, responses=_SNIPPET_PAGE)
async def embedded(snippet_id: str, request: Request, services: ServicesDep) -> Response:
    """A snippet and its outputs, read-only and compact, for an iframe in docs and
    tutorials (the page tells the view by its path). The sites that may frame it are
    the setting `embed_frame_ancestors`."""
    return await _snippet_page(
        request, services, snippet_id, services.settings.embed_frame_ancestors
    )
