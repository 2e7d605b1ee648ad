"""What a deviceless GPU compile (``gpu_target``) costs beside a CPU compile.

The engine runs tests/engine/test_gpu_target.py's ``jit(grad(f))`` (a 64x64 matmul with
tanh, sin and exp: four GPU kernels) in a fresh worker process per run, alternating:
on CPU, and for each GPU target, each with outputs ``hlo`` and ``hlo, asm``. Printed:
the median (min, max) ``compile`` stage time of each. Needs JAX's CUDA plugin
(``JAXPLAY_CUDA_EXTRA=1 make setup``). Run:
``.venv/bin/python benchmarks/engine/gpu_target_compile.py [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sandbox.protocol.gpu_target_request import GPU_TARGETS  # noqa: E402
from tests.engine.test_gpu_target import ARGS, CODE, engine  # noqa: E402


def compile_ms(**fields: Any) -> float:
    request = {"code": CODE, "args": ARGS, "transforms": [{"name": "grad"}, {"name": "jit"}]}
    events = engine({**request, **fields})
    (ms,) = [e["ms"] for e in events if e["type"] == "stage" and e["stage"] == "compile"]
    return float(ms)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    rows: dict[str, dict[str, Any]] = {}
    for target in (None, *GPU_TARGETS):
        for outputs in (["hlo"], ["hlo", "asm"]):
            rows[f"{target or 'cpu'} {'+'.join(outputs)}"] = {
                "outputs": outputs,
                **({"gpu_target": target} if target else {}),
            }
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(rounds):
        for name, fields in rows.items():
            times[name].append(compile_ms(**fields))
    print(f"load average {os.getloadavg()[0]:.1f}; {rounds} runs each, a fresh process per run")
    for name, ms in times.items():
        print(
            f"{name:14s} compile median {statistics.median(ms):6.0f} ms  "
            f"(min {min(ms):.0f}, max {max(ms):.0f})"
        )


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
