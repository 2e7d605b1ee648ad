"""What JAX itself compiles for a TPU topology, without a TPU: the reference the
engine's ``tpu_topology`` runs are held to (tests/engine/test_tpu_topology.py).

Run in a fresh process, with the request as JSON::

    python tests/engine/tpu_topology_reference.py '{"code": ..., "tpu_topology": "v5e:2x2", ...}'

It prints one JSON object: the StableHLO and HLO texts, ``memory_analysis()``'s
figures, and the collectives of the HLO, or ``{"error": ...}`` when the compile
fails. Written plainly with JAX's public API and independently of
``sandbox.engine``; libtpu is the one of JAX's TPU extra as setup installs it
(``<venv>/libtpu-extra``), loaded with the variables the engine sets.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

SNIPPET_FILENAME = "snippet.py"
LIBTPU = Path(sys.prefix) / "libtpu-extra" / "libtpu" / "libtpu.so"
COLLECTIVE = re.compile(
    r"= .+? (all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(?:-start)?\("
)


def reference(request: dict[str, Any]) -> dict[str, Any]:
    os.environ.update(
        TPU_SKIP_MDS_QUERY="1", ALLOW_MULTIPLE_LIBTPU_LOAD="1", TPU_LIBRARY_PATH=str(LIBTPU)
    )
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src import source_info_util
    from jax.experimental import topologies
    from jax.sharding import NamedSharding, PartitionSpec

    # as the engine does for its own: this file's frames are not the user's code
    source_info_util.register_exclusion(os.path.abspath(__file__))
    topology = topologies.get_topology_desc(request["tpu_topology"], platform="tpu")
    spec = request["mesh"]
    axis_types = tuple(getattr(jax.sharding.AxisType, t.capitalize()) for t in spec["axis_types"])
    mesh = jax.make_mesh(
        tuple(spec["shape"]), tuple(spec["axis_names"]), axis_types, devices=topology.devices
    )
    namespace: dict[str, Any] = {"jax": jax, "jnp": jnp, "lax": jax.lax, "np": np}
    exec(compile(request["code"], SNIPPET_FILENAME, "exec", dont_inherit=True), namespace)
    args = eval(request["args"], namespace)
    args = args if isinstance(args, tuple) else (args,)
    shardings = tuple(
        NamedSharding(mesh, PartitionSpec(*(s or ()))) for s in request["in_shardings"]
    )
    abstract = [
        jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s)
        for a, s in zip(args, shardings, strict=True)
    ]
    with jax.set_mesh(mesh):
        lowered = jax.jit(namespace["f"], in_shardings=shardings).lower(*abstract)
        try:
            compiled = lowered.compile()
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
    stats = compiled.memory_analysis()
    hlo = compiled.as_text()
    return {
        "stablehlo": lowered.as_text(),
        "hlo": hlo,
        "device_kind": topology.devices[0].device_kind,
        "analysis": {
            name.removesuffix("_in_bytes"): getattr(stats, name)
            for name in dir(stats)
            if name.endswith("_in_bytes")
        },
        "collectives": COLLECTIVE.findall(hlo),
    }


if __name__ == "__main__":
    print(json.dumps(reference(json.loads(sys.argv[1]))))
