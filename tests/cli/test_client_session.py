"""The session ``jaxplay run --server`` keeps (backend/cli/client/session_store.py), against a
real ``jaxplay serve`` on the fake pool (fast): kept per server in one 0600 file; a
session the server no longer honours (a restart with a new key) renewed once, said on
stderr; a server that issues none (this address had its share) runs single-use,
saying so; a broken file said and started again; bad server URLs refused."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from backend.cli.client.session_store import SessionStore, server_key, session_events
from tests.support.live_server import LiveServer

FAKE = ("--pool", "tests.server.fakes:FakePool", "--unsafe-no-jail")  # the fake runs nothing
BODY = {"code": "def f(x):\n    return x\n", "args": "(1.0,)", "outputs": ["value"]}


def run(server: LiveServer, store: SessionStore, notes: list[str]) -> list[dict[str, Any]]:
    events = list(session_events(server.url, BODY, store=store, note=notes.append))
    assert events[-1]["type"] == "done" and events[-1]["status"] == "ok", events[-2:]
    return events


def test_a_session_is_kept_renewed_when_refused_and_skipped_when_none_is_issued(
    tmp_path: Path,
) -> None:
    env = {
        "JAXPLAY_SESSION_ISSUE_BURST": "2",
        "JAXPLAY_SESSION_ISSUE_PER_HOUR": "1",
        "JAXPLAY_PROBE_ON_START": "false",
    }
    server = LiveServer(tmp_path / "a.sqlite3", *FAKE, env=env).start()
    try:
        notes: list[str] = []
        store = SessionStore(tmp_path / "cache" / "jaxplay" / "sessions.json", note=notes.append)
        run(server, store, notes)
        first = store.get(server.url)
        assert first is not None and notes == []
        assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
        run(server, store, notes)
        assert store.get(server.url + "/") == first  # kept, and one entry per server
        # The server restarts without a fixed key: the kept session no longer verifies.
        server.stop()
        server = LiveServer(tmp_path / "a.sqlite3", *FAKE, env=env, port=server.port).start()
        run(server, store, notes)
        assert any("no longer honours" in n for n in notes), notes
        renewed = store.get(server.url)
        assert renewed is not None and renewed != first
        # This address had its share (2: the renewed one and this): single-use, said.
        other = SessionStore(tmp_path / "other.json", note=notes.append)
        run(server, other, notes)
        notes.clear()
        third = SessionStore(tmp_path / "third.json", note=notes.append)
        run(server, third, notes)
        assert third.get(server.url) is None
        assert any("single-use" in n and "sessions" in n for n in notes), notes
    finally:
        server.stop()


def test_a_broken_sessions_file_is_said_and_started_again(tmp_path: Path) -> None:
    notes: list[str] = []
    path = tmp_path / "sessions.json"
    store = SessionStore(path, note=notes.append)
    for broken in ("{not json", "[1, 2]", json.dumps({"format": 99, "servers": {}})):
        path.write_text(broken)
        notes.clear()
        assert store.get("http://127.0.0.1:1") is None
        assert len(notes) == 1 and str(path) in notes[0], notes
    store.put("http://127.0.0.1:1", {"session": "s", "expires_at": 0})  # already expired
    assert store.get("http://127.0.0.1:1") is None
    assert json.loads(path.read_text())["format"] == 1


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://host", "http://", ""])
def test_a_server_that_is_no_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="not a server URL"):
        server_key(url)
    assert server_key("HTTP://LocalHost:8000/") == server_key("http://localhost:8000")
