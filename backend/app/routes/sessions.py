"""``POST /api/v1/sessions``: an anonymous session for a script (issue 47).

A page gets its session with the page (a signed cookie, backend/app/routes/pages.py);
a script has no page, so it asks here once and sends the value back, as the
``X-Jaxplay-Session`` header or the same cookie. Its runs are then one person's, as
a page session's edits are: the jailed pool keeps their process warm between runs,
instead of a single-use jail per run for an address-only caller.

The value is the page's: the same signer, the same lifetime, the same tenant
(``addr:…|session:…``, backend/app/tenancy/identity.py). So a session buys what a page's
cookie buys, no more: a tenant within its address's group (caps, turns, the cache's
evidence and the pool's share all count the address, not the session), and a copy
of it used from another address is another tenant. What is new is the cap on how
many one address is issued (``session_issue_burst``, then ``session_issue_per_hour``).
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from backend.app.core.errors import ApiError
from backend.app.core.wire import ERROR_RESPONSES, ErrorBody
from backend.app.services.container import ServicesDep
from backend.app.tenancy.identity import SESSION_COOKIE, SESSION_HEADER, client_of
from backend.app.web.middleware import origin_allowed

router = APIRouter(prefix="/api/v1", tags=["sessions"])


class SessionIssued(BaseModel):
    """An API session: send ``session`` back in the header ``header`` (or as the
    cookie ``cookie``) with each run."""

    session: str = Field(description="The signed session; a secret of its holder's.")
    header: str = Field(default=SESSION_HEADER, description="The header to send it in.")
    cookie: str = Field(default=SESSION_COOKIE, description="Or the cookie to send it as.")
    max_age_s: int = Field(description="How long the server honours it from now.")
    expires_at: float = Field(description="When it stops being honoured (Unix time).")


@router.post(
    "/sessions",
    status_code=201,
    response_model=SessionIssued,
    responses={
        403: {"model": ErrorBody, "description": "A browser page of a foreign origin asked."},
        429: ERROR_RESPONSES[429],
    },
)
async def issue_session(request: Request, services: ServicesDep) -> JSONResponse:
    """Issues an anonymous session for a script: its runs then share one kept process."""
    origin = request.headers.get("origin")
    if origin is not None and not origin_allowed(request, services.settings, origin):
        # A foreign page could otherwise spend its visitors' addresses' sessions.
        raise ApiError(
            403, "forbidden_origin", f"pages from {origin[:100]} may not ask for a session"
        )
    services.admission.check_session_issue(client_of(request))
    sessions = services.sessions
    value = sessions.issue()
    max_age = int(sessions.max_age_s)
    issued = SessionIssued(session=value, max_age_s=max_age, expires_at=time.time() + max_age)
    response = JSONResponse(issued.model_dump(), status_code=201)
    response.headers["Cache-Control"] = "no-store"
    response.set_cookie(  # for a client with a cookie jar: the page's cookie, as the page sets it
        SESSION_COOKIE,
        value,
        max_age=max_age,
        httponly=True,
        samesite="lax",
        secure=sessions.secure,
    )
    return response
