"""The template's compile seed (sandbox/zygote/seed.py): made by a child of the
template, which itself stays one thread with no backend, and nothing left behind when
that child fails. (That every jail starts with its own copy, and that the warm-ups
load it: tests/jail/test_compile_cache.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: A template's start, as template_main.py makes it (one CPU, JAX imported and warmed,
#: no backend), then the seed; what it says of itself after.
TEMPLATE = """
import json, os, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from sandbox.engine import api
api.prepare()
from jax._src import xla_bridge
from sandbox.zygote import seed
made = seed.make(timeout_s=float(sys.argv[1]))
try:
    os.waitpid(-1, os.WNOHANG)
    left = True
except ChildProcessError:
    left = False
print(json.dumps({
    "names": sorted(made),
    "bytes": sum(len(data) for data, _ in made.values()),
    "threads": len(os.listdir("/proc/self/task")),
    "backends": list(xla_bridge._backends),
    "child_left": left,
}))
"""


def template(tmp_path: Path, timeout_s: float, platforms: str = "cpu") -> tuple[dict, str]:
    env = {"PATH": os.environ["PATH"], "JAX_PLATFORMS": platforms, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", TEMPLATE, str(timeout_s)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def test_the_seed_holds_the_warm_ups_and_the_template_starts_no_backend(tmp_path: Path) -> None:
    said, log = template(tmp_path, 60.0)
    warm_ups = ("jit_broadcast_in_dim-", "jit_convert_element_type-")
    assert all(any(n.startswith(w) for n in said["names"]) for w in warm_ups), said
    assert all(n.endswith("-cache") for n in said["names"]), said
    assert 0 < said["bytes"] < 1 << 20, said
    # the child had the backend and its threads; the template forks as one thread
    assert said["threads"] == 1 and said["backends"] == [] and not said["child_left"], said
    assert f"compile seed: {len(said['names'])} entries" in log
    assert list(tmp_path.iterdir()) == []  # the child's directory is gone


def test_a_seed_whose_child_does_not_end_in_time_is_none_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    said, log = template(tmp_path, 0.0)
    assert said["names"] == [] and not said["child_left"] and said["threads"] == 1, said
    assert "its child took over 0 s" in log
    assert list(tmp_path.iterdir()) == []


def test_a_device_workers_template_makes_no_seed(tmp_path: Path) -> None:
    """The seed's child runs outside any jail: where the jails' JAX would open an
    accelerator, it is not made (and the child not forked)."""
    said, log = template(tmp_path, 60.0, platforms="tpu")
    assert said["names"] == [] and said["threads"] == 1 and said["backends"] == [], said
    assert "JAX_PLATFORMS is not cpu" in log
