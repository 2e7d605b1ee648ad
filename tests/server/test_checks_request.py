"""The request's ``checks`` at the server: refused with a 422 naming the field when
malformed (REST and the WebSocket's run frame, the same RunRequest), and part of the
result cache's key."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.app.trust.cache import ResultCache
from sandbox.protocol import RunRequest

CODE = "def f(x):\n    return x\n"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"checks": ["nan"]}, "checks.0"),
        ({"checks": "nans"}, "checks"),
        ({"checks": ["grad"], "grad_orders": [0]}, "grad_orders.0"),
        ({"checks": ["grad"], "grad_modes": ["lin"]}, "grad_modes.0"),
    ],
)
def test_a_malformed_check_is_a_422_naming_the_field(
    client: TestClient, change: dict[str, Any], field: str
) -> None:
    r = client.post("/api/v1/runs", json={"code": CODE, **change})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field


def test_the_websocket_refuses_an_unknown_check_naming_the_field(client: TestClient) -> None:
    with client.websocket_connect("/api/v1/ws") as ws:
        assert ws.receive_json()["type"] == "hello"
        ws.send_json({"type": "run", "seq": 1, "payload": {"code": CODE, "checks": ["nan"]}})
        message = ws.receive_json()
    assert message["type"] == "error" and message["seq"] == 1
    assert message["payload"]["status"] == 422 and message["payload"]["field"] == "checks.0"


def test_checks_are_in_the_result_cache_key(small_cache: ResultCache) -> None:
    cache = small_cache
    worker = {"backend": "cpu", "jax_version": "0.12.0.1"}
    keys = {
        cache.key(RunRequest(code=CODE, **change), worker)
        for change in (
            {},
            {"checks": ["nans"]},
            {"checks": ["grad"]},
            {"checks": ["grad"], "grad_orders": [2]},
            {"checks": ["grad"], "grad_modes": ["rev"]},
        )
    }
    assert len(keys) == 5


def test_checks_with_nothing_to_run_are_refused(client: TestClient) -> None:
    body = {"code": CODE, "checks": ["nans"], "lowering_platforms": ["tpu"], "outputs": ["jaxpr"]}
    r = client.post("/api/v1/runs", json=body)
    assert r.status_code == 422, r.text
    assert (
        "checks run the pipeline, and with lowering_platforms nothing runs" in r.json()["message"]
    )
