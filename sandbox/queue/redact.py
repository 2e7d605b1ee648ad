"""Secrets out of log lines: a database or Redis URL with its password hidden.

Here, in sandbox/, because the remote worker logs its Redis URL too; the server's
logs (backend/app/core/logs.py) use the same function.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redact_url(url: str | None) -> str | None:
    """``url`` with its password (and query: tokens go there) replaced by ``***``, for logs."""
    if not url:
        return url
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user = parts.username or ""
        netloc = f"{user}:***@{netloc.rsplit('@', 1)[1]}"
    elif "@" in netloc:  # a bare secret as the user name (redis://TOKEN@host)
        netloc = f"***@{netloc.rsplit('@', 1)[1]}"
    if netloc == parts.netloc and not parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", ""))
