"""``POST /api/v1/runs`` without ``Accept: application/x-ndjson`` answers
``{"events": [...]}``, written event by event (issue 33, item 7): the server never
holds a run's whole event list, a large event is encoded off the event loop, and a
client that leaves mid-run cancels its run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from fastapi.testclient import TestClient

from backend.app.routes import runs as run_routes

from .fakes import FakePool
from .test_versions import Leaving, until

Make = Callable[..., tuple[TestClient, FakePool]]
CODE = "def f(x):\n    return x\n"


def test_the_json_answer_is_the_run_s_events_written_one_by_one(make_client: Make) -> None:
    client, pool = make_client()
    big = "x" * (run_routes.THREAD_ENCODE_BYTES * 2)
    pool.script = lambda run: [
        {"type": "jaxpr", "text": big, "sources": []},
        {"type": "value", "repr": "1.0", "tree": []},
    ]
    r = client.post("/api/v1/runs", json={"code": CODE, "cache": False})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.headers["cache-control"] == "no-store" and r.headers["x-run-id"]
    events = r.json()["events"]
    assert [e["type"] for e in events] == ["accepted", "jaxpr", "value", "done"]
    assert events[1]["text"] == big and events[-1]["status"] == "ok"
    # the same events as the NDJSON stream's, in the same order
    lines = client.post(
        "/api/v1/runs",
        json={"code": CODE, "cache": False},
        headers={"Accept": "application/x-ndjson"},
    ).text.splitlines()
    assert [json.loads(line)["type"] for line in lines] == [e["type"] for e in events]


def test_a_json_answer_s_run_is_cancelled_when_its_client_leaves(make_client: Make) -> None:
    client, pool = make_client()
    call = Leaving(client, "/api/v1/runs", {"code": CODE + "# fake: hang\n", "cache": False})

    async def scenario() -> None:
        task = call.start()
        await until(lambda: pool.running == 1, "the run is running")
        call.leave.set()
        await asyncio.wait_for(task, 30)
        await until(lambda: pool.running == 0, "the run ended")

    # a `hang` run ends only when cancelled: the client's leaving cancelled it
    assert client.portal is not None
    client.portal.call(scenario)
    assert pool.finished == 1
