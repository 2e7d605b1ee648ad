"""What asking for passes, asm and memory costs: compile time beside a plain compile.

For each golden case that compiles (tests/golden/cases), side by side, alternating,
each run in a fresh worker process: the engine runs the case's request with outputs
``hlo`` (a plain compile) and with ``hlo, passes, asm, memory`` (a compile that
dumps, then the dump read back, diffed and disassembled). Printed per case: the median ``compile`` stage
time of each and the median time of lower + compile + making the outputs; then the
median ratio over the cases. The goal is at most 2x. Run:
``.venv/bin/python benchmarks/engine/xla_outputs.py [--rounds 3] [--cases N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.golden import case_names, load_case, request_of  # noqa: E402

PLAIN = ["hlo"]
DUMPED = ["hlo", "passes", "asm", "memory"]


def run_once(request: dict[str, Any], outputs: list[str]) -> tuple[float, float] | None:
    """(compile stage ms, lower + compile + outputs ms) of one run in a fresh worker
    process (``python -m sandbox.engine``, as the pool starts one), or None when the
    case does not compile. The second is the engine's own run time less its exec,
    args and execute stages: process start and JAX's import are not in it."""
    message = {"protocol": 1, "run_id": "bench", "request": {**request, "outputs": outputs}}
    out = subprocess.run(
        [sys.executable, "-m", "sandbox.engine"],
        input=json.dumps(message).encode(),
        capture_output=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    ).stdout
    events = [json.loads(line) for line in out.splitlines()]
    stages = {
        e["stage"]: e["ms"] for e in events if e["type"] == "stage" and e["pipeline"] == "main"
    }
    done = [e for e in events if e["type"] == "done"]
    if "compile" not in stages or not done or any(e["type"] == "error" for e in events):
        return None
    outside = sum(stages.get(s, 0.0) for s in ("exec", "args", "execute"))
    return stages["compile"], done[0]["ms"] - outside


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", type=int, default=0, help="only the first N cases")
    args = parser.parse_args()
    names = case_names()[: args.cases or None]
    compile_ratios, total_ratios = [], []
    print(
        f"{'case':32} {'plain ms':>9} {'dumped ms':>10} {'ratio':>6}   {'plain+out':>9} {'dumped+out':>10} {'ratio':>6}"
    )
    for name in names:
        request = request_of(load_case(name))
        if request.get("compare") or request.get("mesh"):
            request = {**request, "compare": []}
        plain: list[tuple[float, float]] = []
        dumped: list[tuple[float, float]] = []
        for _ in range(args.rounds):
            for outputs, into in ((PLAIN, plain), (DUMPED, dumped)):
                result = run_once(request, outputs)
                if result is not None:
                    into.append(result)
        if len(plain) < args.rounds or len(dumped) < args.rounds:
            continue  # a case that does not compile (an error case)
        pc, pt = (statistics.median(x) for x in zip(*plain, strict=True))
        dc, dt = (statistics.median(x) for x in zip(*dumped, strict=True))
        compile_ratios.append(dc / pc)
        total_ratios.append(dt / pt)
        print(
            f"{name[:32]:32} {pc:9.1f} {dc:10.1f} {dc / pc:6.2f}   {pt:9.1f} {dt:10.1f} {dt / pt:6.2f}"
        )
    print(
        f"\n{len(compile_ratios)} cases, {args.rounds} rounds: median ratio "
        f"compile {statistics.median(compile_ratios):.2f}x, lower + compile + outputs "
        f"{statistics.median(total_ratios):.2f}x (goal: at most 2x)"
    )


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
