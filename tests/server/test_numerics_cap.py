"""The operator's cap on the numerics output's size: a request's
``numerics_max_values`` above the server's setting runs with the setting's."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from sandbox.protocol.limits import NUMERICS_MAX_VALUES

from .fakes import FakePool
from .test_api import run_body


def test_numerics_max_values_is_capped_by_the_server(
    make_client: Callable[..., tuple[TestClient, FakePool]],
) -> None:
    client, pool = make_client(numerics_max_values=1000)
    body = run_body(outputs=["numerics"], numerics_max_values=10**9)
    assert client.post("/api/v1/runs", json=body).status_code == 200
    assert pool.requests[-1].numerics_max_values == 1000
    # under the cap, the request's own stands; unset, the protocol's default, capped
    assert client.post("/api/v1/runs", json={**body, "numerics_max_values": 10}).status_code == 200
    assert pool.requests[-1].numerics_max_values == 10
    client2, pool2 = make_client()
    assert client2.post("/api/v1/runs", json=run_body(outputs=["numerics"])).status_code == 200
    assert pool2.requests[-1].numerics_max_values == NUMERICS_MAX_VALUES
