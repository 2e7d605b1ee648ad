"""``gpu_target`` and ``tpu_topology`` are off unless the operator lists the names
(JAXPLAY_GPU_TARGETS, JAXPLAY_TPU_TOPOLOGIES): the server refuses any other before a
worker sees it, by one rule for both (``DEVICELESS_TARGETS`` in backend/app/relay/service.py;
docs/api.md, "Deviceless GPU compiles" and "Deviceless TPU compiles"). Against the
fake pool; the compiles themselves: tests/engine/test_gpu_target.py, tests/engine/test_tpu_topology.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from backend.app import Settings

from .fakes import FakePool

CODE = {"code": "def f(x):\n    return x * 2\n", "args": "jnp.ones(8)"}


@dataclass(frozen=True)
class Target:
    field: str  # the request field
    setting: str  # the Settings field that lists what is offered
    body: dict[str, Any]  # a run that asks for ``asked``
    asked: str
    other: str  # a name the operator may list instead
    off: str  # what the refusal says when nothing is listed
    env: str  # the setting's variable, named in that refusal


GPU = Target(
    "gpu_target",
    "gpu_targets",
    {**CODE, "gpu_target": "h100", "outputs": ["hlo", "asm"]},
    "h100",
    "a100",
    "deviceless GPU compiles are off",
    "JAXPLAY_GPU_TARGETS",
)
TPU = Target(
    "tpu_topology",
    "tpu_topologies",
    {
        **CODE,
        "mesh": {"shape": [4], "axis_names": ["x"]},
        "in_shardings": [["x"]],
        "tpu_topology": "v5e:2x2",
        "outputs": ["hlo", "memory"],
    },
    "v5e:2x2",
    "v5e:4x4",
    "deviceless TPU compiles are off",
    "JAXPLAY_TPU_TOPOLOGIES",
)
TARGETS = pytest.mark.parametrize("target", [GPU, TPU], ids=lambda t: t.field)


@TARGETS
def test_off_by_default_a_target_is_a_422_saying_how_to_enable_it(
    make_client: Callable[..., tuple[Any, FakePool]], target: Target
) -> None:
    client, pool = make_client()
    r = client.post("/api/v1/runs", json=target.body)
    assert r.status_code == 422, r.text
    answer = r.json()
    assert answer["field"] == target.field
    assert target.off in answer["message"]
    assert target.env in answer["message"]
    assert pool.requests == []


@TARGETS
def test_a_name_the_operator_did_not_list_is_a_422_naming_those_listed(
    make_client: Callable[..., tuple[Any, FakePool]], target: Target
) -> None:
    client, pool = make_client(**{target.setting: [target.other]})
    r = client.post("/api/v1/runs", json=target.body)
    assert r.status_code == 422, r.text
    assert r.json()["message"].endswith(f"it offers ['{target.other}']")
    assert pool.requests == []


@TARGETS
def test_a_listed_name_reaches_the_pool(
    make_client: Callable[..., tuple[Any, FakePool]], target: Target
) -> None:
    client, pool = make_client(**{target.setting: [target.asked]})
    r = client.post("/api/v1/runs", json=target.body)
    assert r.status_code == 200, r.text
    assert [getattr(request, target.field) for request in pool.requests] == [target.asked]


def test_the_gpu_setting_refuses_what_is_not_a_target(
    settings_factory: Callable[..., Settings],
) -> None:
    with pytest.raises(ValidationError, match=r"\['h200'\] are not GPU targets"):
        settings_factory(gpu_targets=["h100", "h200"])


def test_the_tpu_setting_refuses_what_is_not_a_topology_name(
    settings_factory: Callable[..., Settings],
) -> None:
    with pytest.raises(ValidationError, match="is not a TPU topology name"):
        settings_factory(tpu_topologies=["v5e:2x2", "--xla_dump_to=/"])
