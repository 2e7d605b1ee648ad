"""The anonymous session ``jaxplay run --server URL`` keeps (issue 47).

A run without a session or a token is its address's and single-use: a jail of its
own, retired after it (docs/api.md, Tenants and limits). One person's CLI runs are
one person's, though, as a page session's edits are: so the CLI asks the server
for a session once (``POST /api/v1/sessions``), keeps it in the user's cache folder
(``$XDG_CACHE_HOME/jaxplay/sessions.json``, else ``~/.cache/jaxplay/``; the file
``0600``, one entry per server) and sends it with every run, which then share one
kept process on the server.

A kept session that the server no longer honours (expired, or a server restarted
without a fixed ``JAXPLAY_SESSION_SECRET``) is a 401 ``invalid_session``: it is
dropped, a new one asked for and the run sent again, once. A server that issues
none (429: this address had its share lately; 404: an older server) runs it
single-use, and the CLI says so on stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from backend.cli.client.rest import ServerError, open_session, stream_run

#: a session this close to its end is not used: a run must not outlive it
EXPIRY_MARGIN_S = 3600.0
FORMAT = 1


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/jaxplay`` (an absolute path, as the spec asks), else
    ``~/.cache/jaxplay``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "jaxplay"


def server_key(server: str) -> str:
    """The server as the store names it: its origin and path, lower-cased, without a
    trailing slash (``http://127.0.0.1:8000/`` and ``HTTP://127.0.0.1:8000`` are one)."""
    parts = urlsplit(server.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not a server URL: {server!r} (http://HOST:PORT or https://...)")
    try:
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        raise ValueError(f"not a server URL: {server!r}: its port is not a number") from None
    return f"{parts.scheme}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


class SessionStore:
    """The sessions kept per server, in one JSON file written whole (a temporary file
    renamed over it), readable by its user only. Two CLIs at once may each ask for a
    session; the last one written is kept, and both are valid."""

    def __init__(self, path: Path | None = None, note: Callable[[str], None] = _stderr) -> None:
        self.path = path or cache_dir() / "sessions.json"
        self._note = note

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self._note(f"jaxplay: {self.path} is unreadable ({exc}); starting it again")
            return {}
        servers = data.get("servers") if isinstance(data, dict) else None
        if not isinstance(servers, dict) or data.get("format") != FORMAT:
            self._note(
                f"jaxplay: {self.path} is not a sessions file of this jaxplay; starting it again"
            )
            return {}
        return servers

    def _write(self, servers: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".sessions.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:  # mkstemp makes it 0600
                json.dump({"format": FORMAT, "servers": servers}, f, indent=1)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def get(self, server: str) -> str | None:
        entry = self._read().get(server_key(server))
        if not isinstance(entry, dict) or not isinstance(entry.get("session"), str):
            return None
        expires = entry.get("expires_at")
        if not isinstance(expires, (int, float)) or expires - EXPIRY_MARGIN_S < time.time():
            return None
        return str(entry["session"])

    def put(self, server: str, issued: dict[str, Any]) -> None:
        servers = self._read()
        servers[server_key(server)] = {
            "session": issued["session"],
            "expires_at": float(issued.get("expires_at") or time.time() + 3600.0),
        }
        self._write(servers)

    def forget(self, server: str) -> None:
        servers = self._read()
        if servers.pop(server_key(server), None) is not None:
            self._write(servers)


def _new_session(server: str, store: SessionStore, note: Callable[[str], None]) -> str | None:
    """A session from the server, kept; None (said on stderr) when it issues none."""
    try:
        issued = open_session(server)
    except ServerError as exc:
        if exc.status in (404, 405):
            note(
                "jaxplay: this server issues no sessions (an older jaxplay): each run is single-use"
            )
            return None
        if exc.status == 429:
            note(f"jaxplay: no session: {exc.message}; this run is single-use")
            return None
        raise
    store.put(server, issued)
    return str(issued["session"])


def session_events(
    server: str,
    request: Mapping[str, Any],
    *,
    store: SessionStore,
    note: Callable[[str], None],
) -> Iterator[dict[str, Any]]:
    """The run's events, sent with this user's kept session for ``server`` (a new one
    asked for when none is kept, or when the server no longer honours it)."""
    session = store.get(server)
    fresh = session is None
    if session is None:
        session = _new_session(server, store, note)
    try:
        yield from stream_run(server, request, session=session)
        return
    except ServerError as exc:
        # A 401 comes before the first event: nothing was shown yet, the run can go again.
        if exc.error != "invalid_session" or fresh:
            raise
    store.forget(server)
    note("jaxplay: the server no longer honours this machine's session; asking for a new one")
    session = _new_session(server, store, note)
    yield from stream_run(server, request, session=session)
