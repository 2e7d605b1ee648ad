"""Who a request belongs to.

The warm pool gives each tenant its own workers, never shared: a WebSocket
connection is a tenant; over REST an API token names the tenant, else the client
address does. The rate limit is paid by the client address, or by the token when it
is one of the server's known ``api_tokens`` (so minting tokens buys nothing).
"""

from __future__ import annotations

import hashlib

from starlette.requests import HTTPConnection

from backend.app.runs import Caller


def _token(conn: HTTPConnection) -> str | None:
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer " and auth[7:].strip():
        return auth[7:].strip()
    token = conn.headers.get("x-api-token") or conn.query_params.get("token")
    return token or None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def client_address(conn: HTTPConnection) -> str:
    return conn.client.host if conn.client else "unknown"


def caller_for(
    conn: HTTPConnection, known_tokens: frozenset[str], connection_id: str | None = None
) -> Caller:
    token = _token(conn)
    address = f"addr:{client_address(conn)}"
    rate_key = f"token:{_digest(token)}" if token and token in known_tokens else address
    if connection_id is not None:
        return Caller(tenant=f"ws:{connection_id}", rate_key=rate_key, max_runs=1)
    tenant = f"token:{_digest(token)}" if token else address
    return Caller(tenant=tenant, rate_key=rate_key)
