"""Shared links: storing a snippet, reading one back, and the code a link names.

The steps more than one route takes: ``POST /api/v1/snippets`` and a notebook's import
store (``store_snippet``); the snippet, page and report routes read (``load_snippet``);
the WebSocket and ``POST /api/v1/across`` ask whose code a link is (``link_code_of``).
Creating one is rate-limited per client address (``snippet_rate_per_minute``) and
capped in size (``max_snippet_bytes``); a client that looks up too many ids that do
not exist is told to wait (``not_found_rate_per_minute``), so ids cannot be found by
guessing.
"""

from __future__ import annotations

import re

from fastapi import Request

from backend.app.core.errors import ApiError, log_internal
from backend.app.core.wire import SnippetBody, SnippetCreated
from backend.app.services.container import Services
from backend.app.storage.base import canonical_json, disk_full, snippet_digest
from backend.app.tenancy.identity import caller_for, client_of
from backend.app.tenancy.turns import group_of
from backend.app.trust.provenance import NO_LINK, UNKNOWN, LinkCode, link_code

SNIPPET_ID = re.compile(r"^[a-z2-7]{8,52}$")


def snippet_url(request: Request, public_url: str | None, snippet_id: str) -> str:
    base = public_url.rstrip("/") if public_url else str(request.base_url).rstrip("/")
    return f"{base}/s/{snippet_id}"


def storage_failed(where: str, exc: Exception, what: str) -> ApiError:
    """The 503 for a failed snippet store call, saying which failure it was: a full
    disk (nothing was written: SQLite and PostgreSQL roll the statement back) or a
    database that cannot be reached (down, restarting); logged for the operator."""
    log_internal(where, exc)
    if disk_full(exc):
        return ApiError(
            503,
            "storage_full",
            f"the server's database is out of disk space: {what}; try again later",
            retry_after_s=60,
        )
    return ApiError(
        503,
        "storage_unavailable",
        f"the server's database is unavailable: {what}; try again in a few seconds",
        retry_after_s=5,
    )


async def load_snippet(services: Services, client: str, snippet_id: str) -> str | None:
    """The stored request's canonical JSON, or None for an unknown id (counted
    against ``client``); 429 for a client that missed too often."""
    services.admission.check_lookups(client)
    body: str | None = None
    if SNIPPET_ID.match(snippet_id):
        try:
            body = await services.storage.get_snippet(snippet_id)
        except Exception as exc:
            raise storage_failed("storage.get_snippet", exc, "the snippet cannot be read now")
    if body is None:
        services.admission.note_miss(client)
    return body


async def link_code_of(services: Services, client: str, link: str | None) -> LinkCode:
    """The code of the shared link a page names (``?link=ID``, backend/app/trust/provenance.py),
    read from the store: a name that is no snippet id, or no snippet's, names none; a
    store that fails, or a client that missed too often, names an unknown one (every
    run of that request is taken as not the caller's own)."""
    if not link or not SNIPPET_ID.match(link):
        return NO_LINK
    try:
        return link_code(await load_snippet(services, client, link))
    except ApiError:
        return UNKNOWN


async def store_snippet(body: SnippetBody, request: Request, services: Services) -> SnippetCreated:
    """Store a request; the same content always gets the same id."""
    canonical = canonical_json(body.to_request())
    limit = services.settings.max_snippet_bytes
    if len(canonical.encode()) > limit:
        raise ApiError(413, "too_large", f"body: the snippet is over {limit} bytes", field="body")
    services.admission.check_snippet_rate(client_of(request))
    try:
        snippet_id = await services.storage.put_snippet(snippet_digest(canonical), canonical)
    except Exception as exc:
        raise storage_failed("storage.put_snippet", exc, "the snippet was not stored")
    try:  # a shared answer is worth confirming now, before the link's readers come,
        # on the sharer's account (an invented token is no one's: no pristine run)
        caller = caller_for(request, services.known_tokens, services.sessions)
        await services.runs.confirm_soon(body.to_request(), group_of(caller.tenant))
    except ApiError:
        pass
    except Exception as exc:
        log_internal("cache.confirm_soon", exc)
    return SnippetCreated(
        id=snippet_id, url=snippet_url(request, services.settings.public_url, snippet_id)
    )
