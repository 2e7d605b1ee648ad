"""``gpu_target`` is off unless the operator lists the GPUs (JAXPLAY_GPU_TARGETS): the
server refuses any other before a worker sees it (docs/api.md, "Deviceless GPU
compiles"). Against the fake pool; the compiles themselves: tests/test_gpu_target.py."""

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
    "gpu_target": "h100",
    "outputs": ["hlo", "asm"],
}


def test_off_by_default_a_gpu_target_is_a_422_saying_how_to_enable_it(
    make_client: Callable[..., tuple[Any, FakePool]],
) -> None:
    client, pool = make_client()
    r = client.post("/api/v1/runs", json=BODY)
    assert r.status_code == 422, r.text
    answer = r.json()
    assert answer["field"] == "gpu_target"
    assert "deviceless GPU compiles are off" in answer["message"]
    assert "JAXPLAY_GPU_TARGETS" in answer["message"]
    assert pool.requests == []


def test_a_target_the_operator_did_not_list_is_a_422_naming_those_listed(
    make_client: Callable[..., tuple[Any, FakePool]],
) -> None:
    client, pool = make_client(gpu_targets=["a100"])
    r = client.post("/api/v1/runs", json=BODY)
    assert r.status_code == 422, r.text
    assert r.json()["message"].endswith("it offers ['a100']")
    assert pool.requests == []


def test_a_listed_target_reaches_the_pool(
    make_client: Callable[..., tuple[Any, FakePool]],
) -> None:
    client, pool = make_client(gpu_targets=["h100"])
    r = client.post("/api/v1/runs", json=BODY)
    assert r.status_code == 200, r.text
    assert [request.gpu_target for request in pool.requests] == ["h100"]


def test_the_setting_refuses_what_is_not_a_target(
    settings_factory: Callable[..., Settings],
) -> None:
    with pytest.raises(ValidationError, match=r"\['h200'\] are not GPU targets"):
        settings_factory(gpu_targets=["h100", "h200"])
