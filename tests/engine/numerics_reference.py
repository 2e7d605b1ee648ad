"""The numerics tests' reference: a computation done in plain JAX in a fresh process
(the engine's shadow runs in the run's own process: this one shares nothing with it).
``code`` sets ``result``, a dict of numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

PRELUDE = "import json, numpy as np, jax, jax.numpy as jnp\n"
X64 = "jax.config.update('jax_enable_x64', True)\n"


def reference(code: str, *, x64: bool = True) -> dict[str, Any]:
    """``result`` of ``code`` run in a fresh process (``x64``: with jax_enable_x64)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    program = PRELUDE + (X64 if x64 else "") + code + "\nprint(json.dumps(result))"
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
