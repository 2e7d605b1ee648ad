"""A request's ``gpu_target``: compile for a named NVIDIA GPU without one.

The targets are the files of ``sandbox/engine/gpu_targets/`` (one XLA
``GpuTargetConfigProto`` each, named after the GPU): that folder is the one list
of them. What compiling for one does is ``sandbox/engine/core/gpu_target.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

GPU_TARGETS_DIR = Path(__file__).resolve().parents[1] / "engine" / "gpu_targets"
#: The GPU targets a request may name: ``h100``, ``a100``, ...
GPU_TARGETS: tuple[str, ...] = tuple(sorted(p.stem for p in GPU_TARGETS_DIR.glob("*.txtpb")))
#: What a compile for a GPU the worker does not have cannot give: nothing runs
NOT_FOR_GPU_TARGET = ("value", "timing")


def check_gpu_target(
    target: str | None,
    outputs: Sequence[str],
    *,
    backend: str,
    mesh: object,
    lowering_platforms: object,
) -> None:
    """A ValueError saying what does not go with ``gpu_target``, if anything."""
    if target is None:
        return
    if target not in GPU_TARGETS:
        raise ValueError(f"unknown gpu_target {target!r}; known: {', '.join(GPU_TARGETS)}")
    ran = sorted(set(outputs) & set(NOT_FOR_GPU_TARGET))
    if ran:
        raise ValueError(
            f"gpu_target compiles for a GPU this worker does not have; nothing runs: drop {ran} "
            "from outputs"
        )
    if backend not in ("cpu", "auto"):
        raise ValueError(
            "gpu_target is a compile on a CPU worker (backend cpu or auto); a GPU worker's "
            "asm output is the PTX of its own GPU"
        )
    if mesh is not None:
        raise ValueError("gpu_target compiles for one GPU: a mesh is not supported with it")
    if lowering_platforms:
        raise ValueError("gpu_target and lowering_platforms do not go together")
