"""The kernels' dump that ``asm`` reads (core/xla_dump.py) on the CPU: the LLVM IR and
the object files, and none of the MLIR fusion emitters' own dumps, whose writing
crashes XLA when it compiles kernels on several threads (issue 50: SIGSEGV, SIGABRT
"pure virtual method called" or "double free"; benchmarks/engine/cpu_dump_crash.py is the
plain-JAX reproducer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox.engine.core.xla_dump import Dump

ROOT = Path(__file__).resolve().parents[2]
MLP_STEP = (ROOT / "examples" / "profile_mlp_step.py").read_text()


def test_the_kernels_dump_has_llvm_ir_and_objects_and_no_mlir_emitter_dumps(
    tmp_path: Path,
) -> None:
    import jax
    import jax.numpy as jnp

    def step(w: Any, x: Any) -> Any:
        return jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w)

    cpu = jax.devices("cpu")[0]  # the CPU's compile, also where an accelerator is the default
    args = jax.device_put((jnp.ones((16, 16)), jnp.ones((4, 16))), cpu)
    lowered = jax.jit(step).lower(*args)
    lowered.compile(Dump(tmp_path).compiler_options(["kernels"]))
    names = os.listdir(tmp_path)
    assert any(n.endswith(".ir-with-opt.ll") for n in names), names
    assert any(n.endswith(".ir-no-opt.ll") for n in names), names
    assert any(n.endswith(".o") for n in names), names
    # the dumps that crash a compile on several threads
    assert not [n for n in names if n.endswith((".mlir", "mlir-passes.log"))]


@pytest.mark.slow
def test_asm_in_fresh_workers_on_several_cpus_never_crashes() -> None:
    """The crash needs XLA's compile on several threads and is a race: without the
    fix, 2 of 4 processes died on the 2-CPU development machine, every one with 13
    CPUs (the TPU VM). Four fresh workers each compile the profile example's MLP
    step for ``asm``: the chance that all four survive without the fix is about
    1/16 here, none there."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the crash needs XLA compiling on several threads: this process has 1 CPU")
    from sandbox.protocol import RunRequest
    from sandbox.supervisor import worker_message

    request = RunRequest.model_validate(
        {
            "code": MLP_STEP,
            "args": "(params, x, y)",
            "transforms": [{"name": "jit"}],
            "outputs": ["asm"],
        }
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    for trial in range(4):
        proc = subprocess.run(
            [sys.executable, "-m", "sandbox.engine"],  # not -I: JAX may be on PYTHONPATH
            input=worker_message(f"kernel-dump-{trial}", request),
            capture_output=True,
            cwd=ROOT,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, (trial, proc.returncode, proc.stderr.decode()[-1500:])
        events = [json.loads(line) for line in proc.stdout.decode().splitlines()]
        assert events[-1]["status"] == "ok", events[-1]
        asm = next(e for e in events if e["type"] == "asm")
        assert asm["kernels"] and any(k["llvm_ir"] for k in asm["kernels"])
