"""``tpu_topology`` is off unless the operator lists the names (JAXPLAY_TPU_TOPOLOGIES):
the server refuses any other before a worker sees it (docs/api.md, "Deviceless TPU
compiles"). Against the fake pool; the compiles themselves: tests/test_tpu_topology.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from backend.app import Settings

from .fakes import FakePool

BODY = {
    "code": "def f(x):\n    return x * 2\n",
    "args": "jnp.ones(8)",
    "mesh": {"shape": [4], "axis_names": ["x"]},
    "in_shardings": [["x"]],
    "tpu_topology": "v5e:2x2",
    "outputs": ["hlo", "memory"],
}


def test_off_by_default_a_topology_is_a_422_saying_how_to_enable_it(
    make_client: Callable[..., tuple[Any, FakePool]],
) -> None:
    client, pool = make_client()
    r = client.post("/api/v1/runs", json=BODY)
    assert r.status_code == 422, r.text
    answer = r.json()
    assert answer["field"] == "tpu_topology"
    assert "deviceless TPU compiles are off" in answer["message"]
    assert "JAXPLAY_TPU_TOPOLOGIES" in answer["message"]
    assert pool.requests == []


def test_a_topology_the_operator_did_not_list_is_a_422_naming_those_listed(
    make_client: Callable[..., tuple[Any, FakePool]],
) -> None:
    client, pool = make_client(tpu_topologies=["v5e:4x4"])
    r = client.post("/api/v1/runs", json=BODY)
    assert r.status_code == 422, r.text
    assert r.json()["message"].endswith("it offers ['v5e:4x4']")
    assert pool.requests == []


def test_a_listed_topology_reaches_the_pool(
    make_client: Callable[..., tuple[Any, FakePool]],
) -> None:
    client, pool = make_client(tpu_topologies=["v5e:2x2"])
    r = client.post("/api/v1/runs", json=BODY)
    assert r.status_code == 200, r.text
    assert [request.tpu_topology for request in pool.requests] == ["v5e:2x2"]


def test_the_setting_refuses_what_is_not_a_topology_name(
    settings_factory: Callable[..., Settings],
) -> None:
    with pytest.raises(ValidationError, match="is not a TPU topology name"):
        settings_factory(tpu_topologies=["v5e:2x2", "--xla_dump_to=/"])
