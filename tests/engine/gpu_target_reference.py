"""What JAX itself compiles for a GPU target, without a GPU: the reference the
engine's ``gpu_target`` runs are held to (tests/engine/test_gpu_target.py).

Run in a fresh process, with the request as JSON::

    python tests/engine/gpu_target_reference.py '{"code": ..., "args": ..., "gpu_target": "h100"}'

It prints one JSON object: the HLO text and the PTX of each kernel (by name), the
``.target`` line and XLA's live-range peak (step, values' bytes), compiled as
``jit(grad(f))``. Written plainly with JAX's
public API and independently of ``sandbox.engine``: JAX finds the CUDA plugin of
the extra as setup installs it (``<venv>/cuda-extra``) on ``sys.path``, as it finds
any installed plugin, with ``JAX_PLATFORMS=cpu`` as in the jail.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

SNIPPET_FILENAME = "snippet.py"
TARGETS = Path(__file__).resolve().parents[2] / "sandbox" / "engine" / "gpu_targets"
ENTRY = re.compile(r"^(?:\.visible )?\.entry (\w+)\(.*?^\}", re.M | re.S)


def reference(request: dict[str, Any]) -> dict[str, Any]:
    os.environ["JAX_PLATFORMS"] = "cpu"
    sys.path.append(str(Path(sys.prefix) / "cuda-extra"))
    import jax
    import jax.numpy as jnp
    from jax._src import source_info_util
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    # as the engine does for its own: this file's frames are not the user's code
    source_info_util.register_exclusion(os.path.abspath(__file__))
    config = (TARGETS / f"{request['gpu_target']}.txtpb").read_text()
    topology = topologies.get_topology_desc(platform="cuda", topology="1x1x1", target_config=config)
    namespace: dict[str, Any] = {"jax": jax, "jnp": jnp}
    exec(compile(request["code"], SNIPPET_FILENAME, "exec", dont_inherit=True), namespace)
    args = eval(request["args"], namespace)
    sharding = SingleDeviceSharding(topology.devices[0])
    abstract = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in args]
    with tempfile.TemporaryDirectory() as dump:
        compiled = (
            jax.jit(jax.grad(namespace["f"]))
            .lower(*abstract)
            .compile({"xla_dump_to": dump, "xla_dump_emitter_re": "ptx"})
        )
        kernels: dict[str, str] = {}
        targets: set[str] = set()
        peak: dict[str, Any] | None = None
        for name in sorted(os.listdir(dump)):
            if "jit_f" in name and name.endswith("after_optimizations-live-range.txt"):
                # XLA's peak of the schedule: its step and the bytes of each value live there
                found = re.search(
                    r"Live ranges at (\d+) \(peak\):\n((?:    .*\n?)*)",
                    Path(dump, name).read_text(),
                )
                if found:
                    sizes = re.findall(r"^    \S+?: (\d+) bytes", found.group(2), re.M)
                    peak = {"step": int(found.group(1)), "values": sorted(map(int, sizes))}
            if name.endswith(".ptx"):
                text = Path(dump, name).read_text()
                targets.update(re.findall(r"^\.target (\S+)", text, re.M))
                kernels.update((m.group(1), m.group(0) + "\n") for m in ENTRY.finditer(text))
    return {
        "hlo": compiled.as_text(),
        "kernels": kernels,
        "targets": sorted(targets),
        "live_range_peak": peak,
    }


if __name__ == "__main__":
    print(json.dumps(reference(json.loads(sys.argv[1]))))
