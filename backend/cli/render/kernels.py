"""How the CLI shows the ``kernels`` output: per pallas_call, its grid map (which
block of each operand every grid point reads or writes), the kernel's jaxpr, its
Mosaic-TPU module and its Triton IR."""

from __future__ import annotations

from typing import Any


def _block(start: list[int], size: list[int]) -> str:
    return "[" + ", ".join(f"{a}:{a + b}" for a, b in zip(start, size, strict=False)) + "]"


def grid_lines(kernel: dict[str, Any]) -> list[str]:
    """One line per grid point: the point, then each operand's block (element ranges)."""
    grid, operands = kernel.get("grid", []), kernel.get("operands", [])
    lines = [f"  grid {tuple(grid)}: {kernel.get('points', 0)} points"]
    for op in operands:
        lines.append(
            f"    {op['kind']:<7} {op['origin']}: {op['dtype']}{op['shape']} in blocks of "
            f"{op['block_shape']}"
        )
    points = kernel.get("points", 0)
    shape = grid or []
    for p in range(points):
        index, rest = [], p
        for g in reversed(shape):
            index.append(rest % g)
            rest //= g
        where = tuple(reversed(index))
        blocks = [
            f"{op['origin']}{_block(op['starts'][p], op['block_shape'])}"
            for op in operands
            if p < len(op.get("starts", []))
        ]
        lines.append(f"    {where}: " + "  ".join(blocks))
    lines += [f"  note: {n}" for n in kernel.get("grid_notes", [])]
    return lines


def kernels_text(event: dict[str, Any]) -> str:
    pipeline = event.get("pipeline", "main")
    tag = "" if pipeline == "main" else f" [compare {pipeline}]"
    kernels = event.get("kernels", [])
    lines = [f"── kernels{tag}: {len(kernels)} pallas_call(s) ──"]
    for k in kernels:
        lines.append(f"kernel {k['name']}")
        lines += grid_lines(k)
        lines += ["  jaxpr:", *("    " + t for t in k["jaxpr"].splitlines())]
        if k.get("mosaic"):
            lines.append(f"  Mosaic-TPU module ({k.get('mosaic_target')}):")
            lines += ["    " + t for t in k["mosaic"].splitlines()]
        if k.get("triton"):
            lines.append(f"  Triton IR ({k.get('triton_target')}):")
            lines += ["    " + t for t in k["triton"].splitlines()]
        lines += [f"  note: {n}" for n in k.get("notes", [])]
    lines += [f"note: {n}" for n in event.get("notes", [])]
    return "\n".join(lines)
