"""Compiling for a named NVIDIA GPU without one: XLA's deviceless GPU compile.

JAX's CUDA plugin (``jax-cuda12-plugin`` and ``jax-cuda12-pjrt``, installed off
``sys.path`` by sandbox/environments/cuda_extra.py and registered here) can describe a GPU it
does not have: ``jax.experimental.topologies.get_topology_desc(platform=
"cuda", target_config=...)`` takes XLA's ``GpuTargetConfigProto`` (as text; one
file per target in ``gpu_targets/``) and returns a compile-only device. A function
lowered for arguments placed on that device compiles with XLA's GPU pipeline, LLVM's
NVPTX backend and ptxas (linked into the plugin), on any machine: the dump then
holds each kernel's PTX (``xla_dump.asm_event`` reads it, as it does a GPU worker's
own). No CUDA library, driver or device node is read, so it runs in the CPU jail.

Nothing compiled this way runs. XLA cannot autotune without the device: it keeps
its default kernel choices, which a real GPU's autotuner may change.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from typing import Any

from sandbox.engine.core.mesh import abstract_args as on_devices
from sandbox.environments import cuda_extra
from sandbox.protocol.gpu_target_request import GPU_TARGETS, GPU_TARGETS_DIR

#: One GPU: the topology ``get_topology_desc`` builds (slices x hosts x devices)
TOPOLOGY = "1x1x1"


def target_config(name: str) -> str:
    """The target's GpuTargetConfigProto, as text."""
    if name not in GPU_TARGETS:
        raise ValueError(f"unknown gpu_target {name!r}; known: {', '.join(GPU_TARGETS)}")
    return (GPU_TARGETS_DIR / f"{name}.txtpb").read_text()


@functools.cache
def _register_plugin() -> None:
    """Register JAX's CUDA plugin from the environment's extra folder (off
    ``sys.path``: sandbox/environments/cuda_extra.py) as JAX's own plugin discovery would; a
    process that started its CPU backend already may still add it."""
    import jax

    folder = cuda_extra.plugin_dir(jax.__version__)
    sys.path.append(str(folder))
    # Without a GPU the plugin's check of the CUDA libraries' versions fails (none is
    # installed: a compile does not load them); the jail runs with JAX_PLATFORMS=cpu,
    # which skips it, and this says so for a process without that.
    os.environ["JAX_SKIP_CUDA_CONSTRAINTS_CHECK"] = "1"
    # The plugin's own INFO lines ("Found GPU target config and no PjRtClient...") are
    # XLA's, not the run's: in a zygote forked from a jail template (which imported JAX
    # as another uid) they reached the run's stderr, where a bubblewrap zygote's never
    # did. A run's output says what its code printed; an operator's setting wins.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import jax_plugins.xla_cuda12 as plugin

    plugin.initialize()


def target_device(name: str) -> Any:
    """The compile-only device of GPU target ``name``."""
    from jax.experimental import topologies

    _register_plugin()
    topology = topologies.get_topology_desc(
        platform="cuda", topology=TOPOLOGY, target_config=target_config(name)
    )
    return topology.devices[0]


def abstract_args(args: tuple[Any, ...], name: str) -> tuple[Any, ...]:
    """The arguments for a compile for GPU target ``name``: abstract on the target's
    compile-only device, which holds no data (the plugin loads only once the
    arguments pass)."""
    from jax.sharding import SingleDeviceSharding

    def shardings() -> list[Any]:
        return [SingleDeviceSharding(target_device(name))] * len(args)

    return on_devices(args, shardings, "gpu_target", "the GPU")


def with_capacity(event: dict[str, Any], compiled: Any) -> dict[str, Any]:
    """A ``memory`` event with, for a compile for a GPU target, the GPU (its device
    kind) and its memory as the target's file states it (``capacity_bytes``). XLA
    compiles a program over it all the same (it only logs), so a note says when
    ``peak_bytes`` is over: the program would not fit on that GPU."""
    # only a process that registered the plugin can have compiled for a target
    if _register_plugin.cache_info().currsize == 0:
        return event
    kind = _device_kind(compiled)
    capacity = _memory_by_kind().get(kind or "")
    if kind is None or capacity is None:
        return event
    event["device_kind"], event["capacity_bytes"] = kind[:256], capacity
    peak = event.get("peak_bytes")
    if peak is not None and peak > capacity:
        event["notes"].append(
            f"peak_bytes ({peak:,}) is over the {capacity:,} bytes of one {kind}: the "
            "program compiled (XLA does not refuse it without the GPU) but would not fit"
        )
    return event


def with_autotuning_note(event: dict[str, Any], compiled: Any) -> dict[str, Any]:
    """An ``asm`` event of a compile for a GPU target, saying what it is not."""
    kind = _device_kind(compiled) if _register_plugin.cache_info().currsize else None
    if kind is not None:
        event["notes"].append(
            f"compiled for an {kind} without one: XLA could not autotune, so these are its "
            "default kernel choices (on the GPU its autotuner may pick other GEMM tilings)"
        )
    return event


def _device_kind(compiled: Any) -> str | None:
    import jax

    for sharding in jax.tree_util.tree_leaves(
        (compiled.input_shardings, compiled.output_shardings),
        is_leaf=lambda s: hasattr(s, "device_set"),
    ):
        for device in getattr(sharding, "device_set", ()):
            return str(device.device_kind) if device.platform in ("cuda", "gpu") else None
    return None


@functools.cache
def _memory_by_kind() -> dict[str, int]:
    """Each target's device kind (its ``device_description_str``, what the plugin's
    device reports) and ``device_memory_size``, read from the target files."""
    found: dict[str, int] = {}
    for name in GPU_TARGETS:
        text = target_config(name)
        kind = re.search(r'^device_description_str: "([^"]*)"', text, re.M)
        size = re.search(r"^\s*device_memory_size: (\d+)", text, re.M)
        if kind and size:
            found[kind.group(1)] = int(size.group(1))
    return found
