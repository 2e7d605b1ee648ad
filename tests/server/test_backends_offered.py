"""``GET /api/v1/backends`` lists what the operator offers beyond the pools: the
``gpu_target`` and ``tpu_topology`` names a run may use (docs/api.md), so the page
shows a "compile for" choice only where the server accepts one. Against the fake pool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .fakes import FakePool


def test_off_by_default_both_lists_are_empty(
    make_client: Callable[..., tuple[Any, FakePool]],
) -> None:
    client, _ = make_client()
    answer = client.get("/api/v1/backends").json()
    assert answer["gpu_targets"] == []
    assert answer["tpu_topologies"] == []
    assert answer["backends"], "the pools are still listed"


def test_the_enabled_names_are_listed_in_the_operators_order_and_each_one_runs(
    make_client: Callable[..., tuple[Any, FakePool]],
) -> None:
    client, pool = make_client(gpu_targets=["h100", "a100"], tpu_topologies=["v5e:2x2"])
    answer = client.get("/api/v1/backends").json()
    assert answer["gpu_targets"] == ["h100", "a100"]
    assert answer["tpu_topologies"] == ["v5e:2x2"]
    # what is listed is what prepare accepts: a listed name reaches the pool
    code = "def f(x):\n    return x * 2\n"
    for target in answer["gpu_targets"]:
        body = {"code": code, "args": "jnp.ones(8)", "gpu_target": target, "outputs": ["hlo"]}
        assert client.post("/api/v1/runs", json=body).status_code == 200
    assert [request.gpu_target for request in pool.requests] == ["h100", "a100"]


def test_a_name_not_listed_is_refused_with_the_list_in_the_message(
    make_client: Callable[..., tuple[Any, FakePool]],
) -> None:
    client, pool = make_client(tpu_topologies=["v5e:2x2"])
    assert client.get("/api/v1/backends").json()["gpu_targets"] == []
    body = {
        "code": "def f(x):\n    return x\n",
        "args": "jnp.ones(8)",
        "tpu_topology": "v5e:4x4",
        "mesh": {"shape": [4], "axis_names": ["x"]},
        "outputs": ["hlo"],
    }
    r = client.post("/api/v1/runs", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "tpu_topology"
    assert r.json()["message"].endswith("it offers ['v5e:2x2']")
    assert pool.requests == []
