"""Plain JAX's reproducer of the CPU compile crash met on a TPU v5e VM (issue 50):
a compile with XLA's per-kernel dump (``xla_dump_emitter_re``) dies with SIGSEGV or
SIGABRT ("double free") when XLA may use several CPUs.

Each variant compiles the page's ``checkpoint`` example (``jit(grad(checkpoint(f,
dots_with_no_batch_dims_saveable)))``) and the profile example's MLP step with one
set of compile options, calls them, reads ``memory_analysis``, and lists what XLA
dumped; each trial is a fresh process on the CPU (``JAX_PLATFORMS=cpu``), since a
crash ends it. Prints, per variant, how many trials died and with which signal.

    python benchmarks/engine/cpu_dump_crash.py [--trials N] [--variants NAME ...]

No jaxplay import in the child: what crashes here is JAX and XLA alone.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

#: compile options per variant; "one CPU" variants pin the process to CPU 0 before
#: JAX starts (XLA sizes its thread pools from the CPUs the process may use)
VARIANTS: dict[str, tuple[dict[str, object], bool]] = {
    "no dump": ({}, False),
    "dump (HLO text)": ({"dump": True}, False),
    "dump + passes": ({"dump": True, "xla_dump_hlo_pass_re": ".*"}, False),
    "dump + emitter .*": ({"dump": True, "xla_dump_emitter_re": ".*"}, False),
    "dump + emitter llvm": ({"dump": True, "xla_dump_emitter_re": "^(llvm)$"}, False),
    "dump + emitter .*, one CPU": ({"dump": True, "xla_dump_emitter_re": ".*"}, True),
}

CHILD = r"""
import json, os, sys, tempfile
options, one_cpu = json.loads(sys.argv[1]), json.loads(sys.argv[2])
if one_cpu:
    os.sched_setaffinity(0, {0})
import jax, jax.numpy as jnp

def f(w, x):
    for _ in range(3):
        x = jnp.tanh(x @ w)
    return jnp.sum(x)

def mlp(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    return jnp.mean((h @ w + b - y) ** 2)

def step(params, x, y):
    grads = jax.grad(mlp)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)

keys = jax.random.split(jax.random.key(0), 4)
sizes = [(64, 256), (256, 256), (256, 256), (256, 10)]
params = [(jax.random.normal(k, s) * 0.05, jnp.zeros(s[1])) for k, s in zip(keys, sizes)]
policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
programs = {
    "checkpoint": (jax.jit(jax.grad(jax.checkpoint(f, policy=policy))),
                   (jnp.eye(4) * 0.5, jnp.ones((2, 4)))),
    "mlp step": (jax.jit(step), (params, jnp.ones((128, 64)), jnp.ones((128, 10)))),
}
found = {}
for name, (fn, args) in programs.items():
    opts = dict(options)
    if opts.pop("dump", False):
        opts.update(xla_dump_to=tempfile.mkdtemp(), xla_dump_hlo_as_text=True)
    lowered = fn.lower(*args)
    compiled = lowered.compile(opts) if opts else lowered.compile()
    compiled.memory_analysis()
    jax.block_until_ready(compiled(*args))
    if "xla_dump_to" in opts:
        names = os.listdir(opts["xla_dump_to"])
        found[name] = sorted({n.rsplit(".", 1)[-1] for n in names})
print("CHILD-OK", json.dumps(found))
"""


def trial(options: dict[str, object], one_cpu: bool) -> tuple[int, str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(options), json.dumps(one_cpu)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    said = proc.stdout.strip().splitlines()[-1:] or proc.stderr.strip().splitlines()[-2:]
    return proc.returncode, " | ".join(said)[:300]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    args = parser.parse_args()
    print(f"CPUs this process may use: {len(os.sched_getaffinity(0))}; trials: {args.trials}")
    for name in args.variants:
        options, one_cpu = VARIANTS[name]
        started = time.perf_counter()
        codes, last = [], ""
        for _ in range(args.trials):
            code, said = trial(options, one_cpu)
            codes.append(code)
            last = said if code == 0 or not last else last
        died = [c for c in codes if c != 0]
        signals = sorted({signal.Signals(-c).name if c < 0 else f"exit {c}" for c in died})
        print(
            f"{name:<30} died {len(died)} of {len(codes)} {', '.join(signals):<16} "
            f"{time.perf_counter() - started:5.1f} s  {last}",
            flush=True,
        )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.support.reproduce import announce

    announce()
    main()
