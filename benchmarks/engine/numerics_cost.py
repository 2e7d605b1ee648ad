"""What the numerics output costs: each page example (examples/menu.json, those that
run on one CPU device) run on a warm engine (a fresh child per run, as a zygote forks
one) with ``outputs: ["value"]`` (the plain run: trace, compile, execute) and with
``["value", "numerics"]``, alternating, ``--rounds`` times; per example the medians of
the runs' ``done.ms``, the numerics output's share (the difference), and its shadow's
own time (the event's ``shadow_ms``: the equations bound in float32 and float64 and
the born errors, without the jit comparison), each over the plain run. Run:
``.venv/bin/python benchmarks/engine/numerics_cost.py [--rounds 5] [--only numerics]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.warm_engine import WarmEngine  # noqa: E402


def requests() -> list[tuple[str, dict[str, Any]]]:
    menu = json.loads((ROOT / "examples" / "menu.json").read_text())["examples"]
    out = []
    for e in menu:
        if e.get("devices", 1) != 1 or e.get("sharding") or e.get("pallasInterpret") == "tpu_races":
            continue
        transforms = [{"name": s["name"], **s.get("options", {})} for s in e["steps"]]
        code = (ROOT / "examples" / e["file"]).read_text()
        out.append(
            (
                e["id"],
                {
                    "code": code,
                    "entry": e.get("entry", "f"),
                    "args": e["args"],
                    "transforms": transforms,
                    "config": e.get("config", {}),
                },
            )
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="", help="examples whose id contains this")
    args = parser.parse_args()
    engine = WarmEngine().start()
    print(
        f"{'example':<28} {'plain ms':>9} {'+numerics':>10} {'output/plain':>13} {'shadow/plain':>13} rows"
    )
    ratios = []
    try:
        for name, base in requests():
            if args.only not in name:
                continue
            plain: list[float] = []
            with_: list[float] = []
            shadow: list[float] = []
            rows = 0
            failed = None
            for _ in range(args.rounds):
                for outputs, into in ((["value"], plain), (["value", "numerics"], with_)):
                    events = engine.run({**base, "outputs": outputs, "timeout_s": 120})
                    done = events[-1]
                    if done["status"] != "ok":
                        failed = done.get("reason") or done["status"]
                        break
                    into.append(done["ms"])
                    event = next((e for e in events if e["type"] == "numerics"), None)
                    if event is not None:
                        shadow.append(event["shadow_ms"])
                        rows = len(event["rows"])
                if failed:
                    break
            if failed:
                print(f"{name:<28} not measured: {failed[:80]}")
                continue
            p, w, s = statistics.median(plain), statistics.median(with_), statistics.median(shadow)
            ratios.append((w - p) / p)
            print(
                f"{name:<28} {p:>9.0f} {w:>10.0f} {(w - p) / p:>12.2f}x {s / p:>12.2f}x {rows:>4}"
            )
    finally:
        engine.stop()
    if ratios:
        print(
            f"numerics output / plain run: median {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x"
        )
    return 0


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    sys.exit(main())
