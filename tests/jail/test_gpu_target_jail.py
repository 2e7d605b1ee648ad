"""A deviceless GPU compile through the real jail (bubblewrap, seccomp, cgroups, the
test limits): JAX's CUDA plugin compiles for an H100 with nothing the jail does not
give every CPU run (no device node, no CUDA library, no /sys), and says nothing on
the run's output."""

from __future__ import annotations

from tests.engine.test_gpu_target import ARGS, BODY, CODE, needs_plugin
from tests.support.live_pool import LivePool, needs_bwrap

pytestmark = [needs_bwrap, needs_plugin]


def test_a_gpu_target_compile_runs_in_the_jail(shared_pool: LivePool) -> None:
    result = shared_pool.run(
        CODE,
        args=ARGS,
        transforms=[{"name": "grad"}, {"name": "jit"}],
        gpu_target="h100",
        outputs=["hlo", "asm", "memory"],
        timeout_s=10,
    )
    assert result.status == "ok", result.events
    assert result.out == ""
    (asm,) = result.of("asm")
    assert asm["kernels"] and all(k["asm"].startswith(".visible .entry ") for k in asm["kernels"])
    assert any("for sm_90a:" in note for note in asm["notes"])
    assert {line for k in asm["kernels"] for line in k["lines"]} == BODY
