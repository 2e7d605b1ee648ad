"""Who a request belongs to: identities the server issues, never ones a client names.

- **A page session**: a random id in a cookie signed with ``session_secret``
  (itsdangerous), set by the page (``/``, ``/s/{id}``) and sent back by its
  WebSocket and its fetches. A cookie that does not verify names no one.
- **An API session**: the same signed value, issued to a script by ``POST
  /api/v1/sessions`` (backend/app/routes/sessions.py, a few per address:
  ``session_issue_burst``) and sent back as the cookie or as the ``X-Jaxplay-Session``
  header (``jaxplay run --server`` keeps it: backend/cli/client/session_store.py). A header
  that does not verify is refused (401 ``invalid_session``): the script asked to be
  someone and should hear that it is not, and get a new one.
- **An API token** the operator issued (``api_tokens``). Any other token is refused
  with 401 (``invalid_token``): an invented token names no tenant and buys nothing.
- **The client address**, for everything else: the TCP peer, or, only when that peer
  is one of ``trusted_proxies``, the address it forwarded (uvicorn's
  ProxyHeadersMiddleware, installed by the factory). IPv6 clients are keyed by their
  /56: a subscriber is commonly handed a /56 (or a /48), so keying by the /64 would
  give one home 256 identities.

A tenant is written ``GROUP|NAME`` (or just ``GROUP``): the group is the client
address (or the token), so the warm pool can share its zygotes fairly between
clients whatever number of sessions one of them opens (sandbox/pool/zygote_pool.py).
The rate limit and the per-client caps are paid by the address, or by the token.

**A tenant is a person, not an address** (issue 33): an address-only caller (no
session, no token: a REST script, ``jaxplay run --server``, an embed framed by
another site, whose browser sends it no cookie) may be many people behind one NAT,
so none of its runs shapes a process kept for a later run (``Caller.keeps_process``
False: each runs in a process, zygote and jail of its own, retired after it).
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets

from itsdangerous import BadSignature, TimestampSigner
from starlette.requests import HTTPConnection

from backend.app.core.errors import ApiError
from backend.app.core.settings import Settings
from backend.app.tenancy.caller import Caller

SESSION_COOKIE = "jaxplay_session"
#: the header a script sends its API session in (the cookie works as well)
SESSION_HEADER = "X-Jaxplay-Session"
#: the IPv6 block taken as one client (caps, rate limits, turns)
IPV6_PREFIX = 56


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def client_key(host: str | None) -> str:
    """``addr:…`` for a peer address: IPv4 as it is, IPv6 by its /56 (an IPv4-mapped
    IPv6 address is its IPv4); something that is not an address, by its hash."""
    if not host:
        return "addr:unknown"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return f"addr:?{_digest(host)}"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"addr:{ip.ipv4_mapped}"
        return f"addr:{ipaddress.IPv6Network((ip, IPV6_PREFIX), strict=False)}"
    return f"addr:{ip}"


class Sessions:
    """Issues and checks the page's signed session cookie."""

    def __init__(self, settings: Settings) -> None:
        secret = settings.session_secret
        key = secret.get_secret_value() if secret is not None else secrets.token_urlsafe(32)
        self._signer = TimestampSigner(key, salt="jaxplay-session")
        self.max_age_s = settings.session_max_age_s
        self.secure = (settings.public_url or "").startswith("https://")

    def issue(self) -> str:
        return self._signer.sign(secrets.token_urlsafe(18)).decode()

    def verify(self, cookie: str | None) -> str | None:
        """The session id, or None for a missing, forged or expired cookie."""
        if not cookie or len(cookie) > 200:
            return None
        try:
            return self._signer.unsign(cookie, max_age=int(self.max_age_s)).decode()
        except (BadSignature, UnicodeError):
            return None


def _token(conn: HTTPConnection) -> str | None:
    """The token a request sends: in a header (``Authorization: Bearer``,
    ``X-API-Token``); a WebSocket may also name it as ``?token=`` (browsers cannot set
    a WebSocket's headers). A REST request with ``?token=`` is refused (400): URLs
    end up in proxies' logs, browser histories and shell histories."""
    if conn.scope["type"] == "http" and "token" in conn.query_params:
        raise ApiError(
            400,
            "token_in_url",
            "an API token in the URL (?token=) is not accepted on REST requests: URLs "
            "are logged and kept in histories; send it as 'Authorization: Bearer TOKEN' "
            "or 'X-API-Token: TOKEN' (only the WebSocket takes ?token=)",
            field="token",
        )
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer " and auth[7:].strip():
        return auth[7:].strip()
    token = conn.headers.get("x-api-token")
    if not token and conn.scope["type"] == "websocket":
        token = conn.query_params.get("token")
    return token or None


def caller_for(conn: HTTPConnection, known_tokens: frozenset[str], sessions: Sessions) -> Caller:
    """The caller of ``conn``; ApiError 401 for a token the server did not issue."""
    token = _token(conn)
    if token is not None:
        sent = token.encode("utf-8", "surrogateescape")
        if not any(secrets.compare_digest(sent, known.encode()) for known in known_tokens):
            raise ApiError(
                401,
                "invalid_token",
                "this API token is not one the server issued; send a token from the "
                "operator, or none to run as your address",
                field="token",
            )
        name = f"token:{_digest(token)}"
        return Caller(tenant=name, rate_key=name)
    address = client_key(conn.client.host if conn.client else None)
    session = _session(conn, sessions)
    if session is None:  # a person? many? an address cannot say: nothing kept for it
        return Caller(tenant=address, rate_key=address, client=address, keeps_process=False)
    tenant = f"{address}|session:{_digest(session)}"
    return Caller(tenant=tenant, rate_key=address, client=address)


def _session(conn: HTTPConnection, sessions: Sessions) -> str | None:
    """The session a request names: the ``X-Jaxplay-Session`` header (a script's; one
    that does not verify is a 401), else the cookie (a page's; one that does not
    verify names no one, and the page hands out a new one)."""
    sent = conn.headers.get(SESSION_HEADER)
    if sent is None:
        return sessions.verify(conn.cookies.get(SESSION_COOKIE))
    session = sessions.verify(sent.strip())
    if session is None:
        raise ApiError(
            401,
            "invalid_session",
            f"this {SESSION_HEADER} is not a session this server issued, or it expired "
            "(or the server restarted without a JAXPLAY_SESSION_SECRET); get a new one "
            "with POST /api/v1/sessions, or send none to run as your address",
            field="session",
        )
    return session


def client_of(conn: HTTPConnection) -> str:
    """The rate key of a request that needs no tenant (snippets, lookups)."""
    return client_key(conn.client.host if conn.client else None)
