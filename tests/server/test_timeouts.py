"""A run out of time says how much more time this server gives (backend/app/relay/timeouts.py):
up to its longest limit (JAXPLAY_MAX_TIMEOUT_S), or that the run had it already."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from backend.app.relay.timeouts import LONGER, timeout_reason

from .fakes import FakePool

SUPERVISOR = "wall clock 20 s, reached in the compile stage (stages done: exec 0.9 s)" + LONGER


def test_the_reason_names_the_longest_limit_or_says_it_was_had() -> None:
    assert timeout_reason(SUPERVISOR, 20, 60) == SUPERVISOR + ": this server allows up to 60 s"
    longest = timeout_reason(SUPERVISOR.replace("20 s", "60 s"), 60, 60)
    assert longest.startswith("wall clock 60 s, reached in the compile stage (stages done: exec")
    assert "60 s is this server's longest limit (JAXPLAY_MAX_TIMEOUT_S)" in longest
    assert LONGER not in longest
    # words that are not the supervisor's are left as they are
    assert timeout_reason("the pool stopped it", 20, 60) == "the pool stopped it"


def _done(client: TestClient, timeout_s: float) -> dict[str, object]:
    body = {"code": "def f(x):\n    return x\n# fake: timeout\n", "args": "(1.0,)"}
    r = client.post("/api/v1/runs", json={**body, "timeout_s": timeout_s, "cache": False})
    assert r.status_code == 200
    done = r.json()["events"][-1]
    assert done["type"] == "done" and done["status"] == "timeout"
    return done


def test_rest_says_how_much_longer_up_to_the_servers_maximum(
    make_client: Callable[..., tuple[TestClient, FakePool]],
) -> None:
    client, _ = make_client(max_timeout_s=45)
    reason = str(_done(client, 20)["reason"])
    assert reason.startswith("wall clock 20 s, reached in the compile stage")
    assert reason.endswith("a longer timeout_s may let it finish: this server allows up to 45 s")
    # asked for more than the server gives: capped, and the reason says it was the most
    reason = str(_done(client, 300)["reason"])
    assert reason.startswith("wall clock 45 s") and "45 s is this server's longest limit" in reason
