"""A deviceless TPU compile through the real jail (bubblewrap, seccomp, cgroups, the
test limits): libtpu loads with nothing the jail does not give every run but
``/sys/devices/system/cpu/possible`` (docs/sandbox.md; the jail has no network, as
tests/jail/test_hostile.py holds), and its start-up warnings stay out of the
run's output."""

from __future__ import annotations

from sandbox.environments import tpu_extra
from sandbox.jail.bwrap import Runtime
from tests.engine.test_tpu_topology import MESH, needs_extra
from tests.support.live_pool import LivePool, needs_bwrap

pytestmark = [needs_bwrap, needs_extra]

CODE = "def f(x, w):\n    return jnp.tanh(x @ w).sum(0)\n"


def test_the_jail_binds_cpu_possible_only_with_the_extra() -> None:
    assert tpu_extra.CPU_POSSIBLE in Runtime.discover().ro_paths


def test_a_topology_compile_runs_in_the_jail(shared_pool: LivePool) -> None:
    result = shared_pool.run(
        CODE,
        args="(jnp.ones((256, 128)), jnp.ones((128, 64)))",
        mesh=MESH,
        in_shardings=[["x", "y"], ["y", None]],
        tpu_topology="v5e:2x2",
        outputs=["hlo", "memory", "sharding"],
        timeout_s=10,
    )
    assert result.status == "ok", result.events
    assert result.out == ""  # libtpu's warnings about the TPU it is not on are not the user's
    (memory,) = result.of("memory")
    assert memory["device_kind"] == "TPU v5 lite" and memory["capacity_bytes"] > 0
    (sharding,) = result.of("sharding")
    assert sharding["devices"] == 4 and {c["kind"] for c in sharding["collectives"]} == {
        "all-reduce"
    }
