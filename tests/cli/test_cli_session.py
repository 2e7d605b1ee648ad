"""``jaxplay run --server`` keeps an anonymous session (issue 47): one person's CLI
runs share one kept process, as a page session's edits do; through a real ``jaxplay
serve`` and the real jailed warm pool.

The kept process is shown the way tests/server/test_hostile_links.py's control
shows it: code that forges the JSON of the value event, run as one's own, forges
one's own later answers (the same process), and nobody else's. Tried as an
attacker would: another person at the same address (the same NAT) with a session of
their own, made by the documented REST recipe; the CLI's session copied and used
from another address; a session file whose session the server does not honour.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.cli.client.session_store import server_key
from tests.server.test_hostile_links import ATTACKS, EXAMPLE, FORGED, single_use_runs
from tests.support.cli import in_process
from tests.support.live_server import LiveServer

pytestmark = pytest.mark.slow

CLEAN = "0.04089159, -0.08178318,  0.16356637"  # grad of the example at ones(3)
ARGS = ["--args", "(jnp.ones((3,)),)", "--transform", "grad", "--transform", "jit"]
ARGS += ["--output", "value", "--timeout", "60", "--json"]
_RUNS = 0
BODY = {
    "code": EXAMPLE,
    "args": "(jnp.ones((3,)),)",
    "transforms": [{"name": "grad"}, {"name": "jit"}],
    "outputs": ["value"],
    "timeout_s": 60,
    "cache": False,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("cli-session") / "jaxplay.sqlite3"
    env = {
        "JAXPLAY_TRUSTED_PROXIES": '["127.0.0.1/32"]',  # "another address" by X-Forwarded-For
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
        "JAXPLAY_POOL_SPARES": "2",
        "JAXPLAY_QUEUE_TIMEOUT_S": "150",
    }
    live = LiveServer(db, "--pool", "zygote", env=env).start()
    yield live
    live.stop()


def shown_repr(events: list[dict[str, Any]]) -> str:
    assert events[-1]["type"] == "done" and events[-1]["status"] == "ok", events[-3:]
    values = [e for e in events if e["type"] == "value"]
    assert len(values) == 1, events[-3:]
    return str(values[0]["repr"])


def cli(server: LiveServer, file: Path, *flags: str) -> tuple[str, str]:
    """``jaxplay run FILE --server URL``: the value it shows, and its stderr. Each run's
    code is new (a comment), so that no answer comes from the result cache: it ran."""
    global _RUNS
    _RUNS += 1
    fresh = file.with_name(f"{file.stem}_{_RUNS}.py")
    fresh.write_text(file.read_text() + f"\n# run {_RUNS}\n")
    proc = in_process("run", str(fresh), *ARGS, *flags, "--server", server.url)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return shown_repr(events), proc.stderr


def rest(c: httpx.Client, body: dict[str, Any], **headers: str) -> str:
    r = c.post("/api/v1/runs", json=body, headers=headers)
    assert r.status_code == 200, r.text
    return shown_repr(r.json()["events"])


def test_a_cli_user_s_runs_share_one_kept_process_and_nobody_else_s(
    server: LiveServer, tmp_path: Path
) -> None:
    plain, attack = tmp_path / "example.py", tmp_path / "attack.py"
    plain.write_text(EXAMPLE)
    attack.write_text(EXAMPLE + ATTACKS["json encoder"])
    kept = Path(os.environ["XDG_CACHE_HOME"]) / "jaxplay" / "sessions.json"
    used = single_use_runs(server)

    value, _ = cli(server, plain)
    assert CLEAN in value
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    entries = json.loads(kept.read_text())["servers"]
    assert list(entries) == [server_key(server.url)]
    session = entries[server_key(server.url)]["session"]

    # Another person at the same address, by the documented recipe (a cookie jar),
    # forges in their own kept process: their own next answer is forged...
    with httpx.Client(base_url=server.url, timeout=200) as other:
        assert other.post("/api/v1/sessions").status_code == 201
        rest(other, {**BODY, "code": EXAMPLE + ATTACKS["json encoder"]})
        assert rest(other, BODY) == FORGED
    # ... the CLI user's is not.
    assert CLEAN in cli(server, plain)[0]

    # The CLI's session copied and used from another address: another tenant.
    with httpx.Client(base_url=server.url, timeout=200) as thief:
        elsewhere = {"X-Forwarded-For": "203.0.113.5", "X-Jaxplay-Session": session}
        rest(thief, {**BODY, "code": EXAMPLE + ATTACKS["json encoder"]}, **elsewhere)
    assert CLEAN in cli(server, plain)[0]

    # The control: the attack as the CLI user's own code forges the user's next run,
    # so the runs did share one process; none of them was single-use.
    cli(server, attack)
    assert cli(server, plain)[0] == FORGED
    assert single_use_runs(server) == used
    # --no-session: the address's, in a single-use jail
    assert CLEAN in cli(server, plain, "--no-session")[0]
    assert single_use_runs(server) == used + 1

    # A session the server does not honour (forged into the file): a new one is asked
    # for, said on stderr, and the run goes in the new session's own process.
    entries[server_key(server.url)]["session"] = session[:-4] + "AAAA"
    kept.write_text(json.dumps({"format": 1, "servers": entries}))
    value, err = cli(server, plain)
    assert CLEAN in value and "no longer honours" in err, err
    renewed = json.loads(kept.read_text())["servers"][server_key(server.url)]["session"]
    assert renewed not in (session, session[:-4] + "AAAA")


def test_a_session_header_the_server_did_not_issue_is_refused(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        r = c.post("/api/v1/runs", json=BODY, headers={"X-Jaxplay-Session": "made.up.value"})
        assert r.status_code == 401 and r.json()["error"] == "invalid_session", r.text
