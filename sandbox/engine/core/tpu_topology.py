"""Deviceless TPU compiles: a named TPU topology's devices, and their HBM.

With JAX's TPU extra installed (sandbox/environments/tpu_extra.py), libtpu describes a TPU
slice it does not have (``jax.experimental.topologies.get_topology_desc("v5e:2x2",
platform="tpu")``): compile-only devices that a mesh can be built over, so that
``jit(...).lower(ShapeDtypeStruct(..., sharding=...)).compile()`` gives the TPU's
own HLO, ``memory_analysis()`` and collectives without a TPU. Nothing can run on
them: a run with a ``tpu_topology`` has abstract arguments only.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from sandbox.environments import tpu_extra

#: Set before libtpu loads. No TPU is attached, so libtpu must not ask the GCE
#: metadata server what it is (the jail has no network: it would wait, then fail);
#: several processes may load it at once (workers outside a jail, tests), and
#: without this the second one fails on the host-wide /tmp/libtpu_lockfile.
LIBTPU_ENV = {"TPU_SKIP_MDS_QUERY": "1", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
#: how libtpu's compiler says a program does not fit: "... exceeds available HBM (15.75G)"
_AVAILABLE_HBM = re.compile(r"exceeds available HBM \((\d+(?:\.\d+)?)([KMGT]?)\)")
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
#: a probe argument no TPU holds (one TiB), for the compiler's out-of-memory report
_PROBE_BYTES = 2**40


class TopologyError(ValueError):
    """libtpu refused the topology name, or the mesh does not fit the topology."""


def _load_library() -> None:
    import jax

    for key, value in LIBTPU_ENV.items():
        os.environ.setdefault(key, value)
    # JAX's own lookup (cloud_tpu_init.get_tpu_library_path) takes this first
    os.environ["TPU_LIBRARY_PATH"] = str(tpu_extra.library_path(jax.__version__))


@functools.cache
def devices(name: str) -> tuple[Any, ...]:
    """The compile-only devices of the topology ``name`` (``v5e:2x2``), in libtpu's order."""
    from jax.experimental import topologies

    _load_library()
    with _quiet_stderr() as said:
        try:
            topology = topologies.get_topology_desc(topology_name=name, platform="tpu")
        except Exception as exc:  # JaxRuntimeError: INVALID_ARGUMENT with libtpu's reason
            raise TopologyError(
                f"libtpu does not know the TPU topology {name!r}: {exc}{said()}"
            ) from exc
    found = tuple(topology.devices)
    # now, before the run's mesh is the ambient one (a probe on one device would clash)
    hbm_bytes(found[0])
    return found


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[Callable[[], str]]:
    """While libtpu starts, its standard error (file descriptor 2, which a run shows
    as its own ``stderr``) goes to a file: libtpu warns there about the TPU it is not
    on (no accelerator type, no worker hostnames), which a deviceless compile does
    not use. What it said is given to an error, should loading fail."""
    with tempfile.TemporaryFile() as caught:
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)

        def said() -> str:
            caught.seek(0)
            text = caught.read(4096).decode(errors="replace").strip()
            return f" (libtpu said: {text})" if text else ""

        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def check_mesh_fits(name: str, shape: list[int]) -> tuple[Any, ...]:
    """The topology's devices, after checking the mesh needs no more of them."""
    found = devices(name)
    needed = 1
    for size in shape:
        needed *= size
    if needed > len(found):
        raise TopologyError(
            f"the mesh {shape} needs {needed} devices; the TPU topology {name!r} has "
            f"{len(found)} ({found[0].device_kind}): shrink the mesh or name a larger topology"
        )
    return found


def is_compile_only(compiled: Any) -> bool:
    """Whether ``compiled`` was compiled for a topology's devices (no TPU attached)."""
    device = _first_device(compiled)
    return device is not None and device.platform == "tpu" and _compile_only(device)


def _first_device(compiled: Any) -> Any:
    import jax

    leaves = jax.tree_util.tree_leaves(
        (compiled.input_shardings, compiled.output_shardings),
        is_leaf=lambda s: hasattr(s, "device_set"),
    )
    for sharding in leaves:
        for device in getattr(sharding, "device_set", ()):
            return device
    return None


def _compile_only(device: Any) -> bool:
    # an attached TPU has memory statistics; a topology's device refuses them
    try:
        device.memory_stats()
    except Exception:
        return True
    return False


def with_capacity(event: dict[str, Any], compiled: Any) -> dict[str, Any]:
    """A ``memory`` event with, for a topology compile, the device kind and the HBM
    one device has for a program (``capacity_bytes``), as libtpu's compiler counts
    it: the program compiled, so its ``peak_bytes`` fit under it."""
    # only a process that loaded a topology can have compiled for one (and so other
    # compiles, on any JAX version, are left as they are without a look)
    if devices.cache_info().currsize == 0 or not is_compile_only(compiled):
        return event
    device = _first_device(compiled)
    event["device_kind"] = str(device.device_kind)[:256]
    event["capacity_bytes"] = hbm_bytes(device)
    if event["capacity_bytes"] is None:
        event["notes"].append(
            "libtpu did not state this device's HBM in the way jaxplay reads "
            "(sandbox/engine/core/tpu_topology.py): capacity_bytes is not shown"
        )
    return event


#: HBM per device kind, probed once per process
_HBM: dict[str, int | None] = {}


def hbm_bytes(device: Any) -> int | None:
    """The HBM a program may use on one device of this kind. libtpu publishes no
    figure, but its compiler states it when a program does not fit, so a probe that
    cannot fit (a one-TiB argument) is compiled once per kind and the figure read
    from the report (to its 0.01 GiB). None if libtpu says it another way."""
    kind = str(device.device_kind)
    if kind not in _HBM:
        _HBM[kind] = _probe_hbm(device)
    return _HBM[kind]


def _probe_hbm(device: Any) -> int | None:
    import jax
    import jax.numpy as jnp

    probe = jax.ShapeDtypeStruct(
        (_PROBE_BYTES,), jnp.int8, sharding=jax.sharding.SingleDeviceSharding(device)
    )
    try:
        jax.jit(lambda x: x).lower(probe).compile()
    except Exception as exc:
        match = _AVAILABLE_HBM.search(str(exc))
        if match:
            return round(float(match.group(1)) * _UNITS[match.group(2)])
    return None
