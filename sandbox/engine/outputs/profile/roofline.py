"""A roofline: what each HLO instruction computes and moves, against the device's peaks.

``compiled.cost_analysis()`` gives one figure per program; XLA keeps its per
instruction figures (HloCostAnalysis) to itself. So each instruction of the
optimised HLO text is counted here by HloCostAnalysis's own rules: an elementwise
op is one FLOP per element of its result (a transcendental one, ``exp``, ``tanh``...,
counts as a transcendental instead), a ``dot`` two per multiply-add, a reduce one
per element folded, a ``convolution`` two per multiply-add of its window; shape
ops (broadcast, reshape, transpose, copy, slice...) none. A fusion computes what
its fused computation does and moves what crosses its boundary: its operands and
its result, each once. The sums of these figures are put next to XLA's own
program totals in the event, so where they differ it shows.

The peaks are this worker's: measured once per process by a short matmul (FLOP/s)
and a large copy (bytes/s), on the device the run uses; for a TPU topology compile
the device's published figures (``PUBLISHED``, with their source).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

#: bytes per element of each HLO element type
_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
    "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "s4": 0.5, "u4": 0.5,
    "s2": 0.25, "u2": 0.25, "token": 0,
}  # fmt: skip
_TRANSCENDENTAL = {
    "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sine",
    "cosine", "tan", "sqrt", "rsqrt", "cbrt", "power", "atan2", "erf",
}  # fmt: skip
_ELEMENTWISE = {
    "abs", "add", "and", "ceil", "clamp", "compare", "complex", "convert", "count-leading-zeros",
    "divide", "floor", "imag", "is-finite", "maximum", "minimum", "multiply", "negate", "not",
    "or", "popcnt", "real", "remainder", "round-nearest-afz", "round-nearest-even", "select",
    "shift-left", "shift-right-arithmetic", "shift-right-logical", "sign", "subtract", "xor",
    "stochastic-convert", "reduce-precision",
} | _TRANSCENDENTAL  # fmt: skip
_SHAPE = re.compile(r"([a-z][a-z0-9]*)\[([0-9,]*)\]")
_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s+\(.*\)\s+->\s+.*\{\s*$")
_NAME = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s+=\s+")
_CALLS = re.compile(r"\bcalls=%?([\w.\-]+)")
_TO_APPLY = re.compile(r"\bto_apply=%?([\w.\-]+)")
_CONTRACTING = re.compile(r"\blhs_contracting_dims=\{([0-9,]*)\}")
_WINDOW = re.compile(r"\bwindow=\{size=([0-9x]+)")
_DIM_LABELS = re.compile(r"\bdim_labels=(\w+)_(\w+)->(\w+)")


@dataclass
class Instruction:
    name: str
    line: int
    computation: str
    opcode: str
    shape: str
    operands: list[str]
    attrs: str


@dataclass
class Module:
    """The instructions of an HLO text by name, and each computation's."""

    instructions: dict[str, Instruction] = field(default_factory=dict)
    computations: dict[str, list[Instruction]] = field(default_factory=dict)


def _matching(text: str, start: int) -> int:
    """The index just past the bracket closing the one at ``start``."""
    depth, opening = 0, text[start]
    closing = {"(": ")", "{": "}", "[": "]"}[opening]
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def parse_module(text: str) -> Module:
    module = Module()
    computation = ""
    for index, line in enumerate(text.split("\n")):
        if header := _HEADER.match(line):
            computation = header.group(1)
            module.computations[computation] = []
            continue
        match = _NAME.match(line)
        if not match or not computation:
            continue
        rest = line[match.end() :]
        end = _matching(rest, 0) if rest.startswith("(") else rest.find(" ")
        if end <= 0:
            continue
        shape, rest = rest[:end], rest[end:].lstrip()
        paren = rest.find("(")
        if paren <= 0:
            continue
        opcode = rest[:paren]
        close = _matching(rest, paren)
        operands = [o.strip().lstrip("%") for o in _split(rest[paren + 1 : close - 1])]
        inst = Instruction(
            match.group(1), index + 1, computation, opcode, shape, operands, rest[close:]
        )
        module.instructions[inst.name] = inst
        module.computations[computation].append(inst)
    return module


def _split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:])
    # an operand may be printed with its type (``f32[2]{0} %x``): keep the name
    return [p.split()[-1] for p in parts if p.strip()]


def shape_bytes(shape: str) -> float:
    return sum(
        _BYTES.get(dtype, 4) * math.prod(int(d) for d in dims.split(",") if d)
        for dtype, dims in _SHAPE.findall(shape)
    )


def shape_elements(shape: str) -> int:
    found = _SHAPE.findall(shape)
    if not found:
        return 0
    return math.prod(int(d) for d in found[0][1].split(",") if d)


def _dims(shape: str) -> list[int]:
    found = _SHAPE.findall(shape)
    return [int(d) for d in found[0][1].split(",") if d] if found else []


@dataclass
class Cost:
    flops: float = 0.0
    transcendentals: float = 0.0
    bytes: float = 0.0


def _computation_flops(module: Module, name: str, seen: frozenset[str] = frozenset()) -> Cost:
    cost = Cost()
    if name in seen:
        return cost
    for inst in module.computations.get(name, []):
        inner = _own_flops(module, inst, seen | {name})
        cost.flops += inner.flops
        cost.transcendentals += inner.transcendentals
    return cost


def _own_flops(module: Module, inst: Instruction, seen: frozenset[str] = frozenset()) -> Cost:
    """What one instruction computes, by HloCostAnalysis's rules."""
    op, out = inst.opcode, shape_elements(inst.shape)
    if op in _TRANSCENDENTAL:
        return Cost(transcendentals=out)
    if op in _ELEMENTWISE:
        return Cost(flops=out)
    if op == "dot":
        lhs = module.instructions.get(inst.operands[0]) if inst.operands else None
        contracting = _CONTRACTING.search(inst.attrs)
        k = 1
        if lhs is not None and contracting:
            dims = _dims(lhs.shape)
            k = math.prod(dims[int(d)] for d in contracting.group(1).split(",") if d)
        return Cost(flops=2 * out * k)
    if op == "convolution":
        window = _WINDOW.search(inst.attrs)
        taps = math.prod(int(s) for s in window.group(1).split("x")) if window else 1
        rhs = module.instructions.get(inst.operands[1]) if len(inst.operands) > 1 else None
        labels = _DIM_LABELS.search(inst.attrs)
        features = 1
        if rhs is not None and labels:
            spec = labels.group(2)
            dims = _dims(rhs.shape)
            if "i" in spec and len(dims) == len(spec):
                features = dims[spec.index("i")]
        return Cost(flops=2 * out * taps * features)
    if op in ("reduce", "reduce-window"):
        operand = module.instructions.get(inst.operands[0]) if inst.operands else None
        applied = _TO_APPLY.search(inst.attrs)
        per = _computation_flops(module, applied.group(1), seen) if applied else Cost(flops=1)
        folded = (shape_elements(operand.shape) if operand else 0) - out
        if op == "reduce-window":
            window = _WINDOW.search(inst.attrs)
            folded = (
                out * (math.prod(int(s) for s in window.group(1).split("x")) - 1) if window else 0
            )
        return Cost(
            flops=max(folded, 0) * per.flops, transcendentals=max(folded, 0) * per.transcendentals
        )
    if op in ("fusion", "call", "while", "conditional", "map"):
        called = _CALLS.search(inst.attrs) or _TO_APPLY.search(inst.attrs)
        if called and op in ("fusion", "call"):
            return _computation_flops(module, called.group(1), seen)
    return Cost()


def instruction_cost(module: Module, name: str) -> Cost | None:
    """The FLOPs, transcendentals and bytes of one executed instruction (a fusion's
    boundary bytes); None where the instruction is not in the module."""
    inst = module.instructions.get(name)
    if inst is None:
        return None
    cost = _own_flops(module, inst)
    moved = shape_bytes(inst.shape)
    for operand in inst.operands:
        source = module.instructions.get(operand)
        if source is not None:
            moved += shape_bytes(source.shape)
    cost.bytes = moved
    return cost


# --- peaks ----------------------------------------------------------------------------

#: Published peaks per chip (dense bf16 FLOP/s, HBM bytes/s), keyed by JAX's device_kind:
#: Google Cloud's TPU documentation (cloud.google.com/tpu/docs/<version>), and for the
#: ``gpu_target`` GPUs NVIDIA's datasheets (dense: half the "with sparsity" figure).
PUBLISHED: dict[str, tuple[float, float, str]] = {
    "TPU v4": (275e12, 1228e9, "https://cloud.google.com/tpu/docs/v4"),
    "TPU v5 lite": (197e12, 819e9, "https://cloud.google.com/tpu/docs/v5e"),
    "TPU v5": (459e12, 2765e9, "https://cloud.google.com/tpu/docs/v5p"),
    "TPU v6 lite": (918e12, 1640e9, "https://cloud.google.com/tpu/docs/v6e"),
    "NVIDIA H100 80GB HBM3": (989e12, 3350e9, "https://www.nvidia.com/en-us/data-center/h100/"),
    "NVIDIA A100-SXM4-80GB": (312e12, 2039e9, "https://www.nvidia.com/en-us/data-center/a100/"),
}

_MEASURED: dict[str, Any] | None = None
#: the matmul's side and the copy's size: long enough to be past the clock's
#: resolution and the caches, short enough for a run (~0.1 s on a loaded core)
MATMUL_N = 512
COPY_BYTES = 32 * 1024 * 1024


def measured_peaks() -> dict[str, Any]:
    """This process's peaks, measured on first use and kept for the process's life."""
    global _MEASURED
    if _MEASURED is None:
        _MEASURED = _measure()
    return _MEASURED


def _best(fn: Any, x: Any, repeats: int = 3) -> float:
    """The best of ``repeats`` timed calls, each fed the last one's result (so a
    donating ``fn`` reuses one buffer: no page faults in the clock)."""
    import jax

    x = jax.block_until_ready(fn(x))
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        x = jax.block_until_ready(fn(x))
        best = min(best, time.perf_counter() - start)
    return best


def _measure() -> dict[str, Any]:
    import jax
    import numpy as np

    # inputs from NumPy: no fill programs to compile, only the two measured
    n = MATMUL_N
    matmul = jax.jit(lambda a: (a @ a) * (1.0 / n))
    flops = 2 * n**3 / _best(matmul, jax.device_put(np.ones((n, n), np.float32)))
    copy = jax.jit(lambda v: v + 1, donate_argnums=0)  # reads and writes every byte once
    moved = 2 * COPY_BYTES / _best(copy, jax.device_put(np.ones(COPY_BYTES // 4, np.float32)))
    return {
        "device_kind": jax.devices()[0].device_kind,
        "flops_per_s": flops,
        "bytes_per_s": moved,
        "source": f"measured in this worker: a {n}×{n} f32 matmul and a "
        f"{COPY_BYTES // 2**20} MiB f32 read+write, best of 3",
    }


def published_peaks(device_kind: str) -> dict[str, Any] | None:
    entry = PUBLISHED.get(device_kind)
    if entry is None:
        return None
    flops, bw, url = entry
    return {
        "device_kind": device_kind,
        "flops_per_s": flops,
        "bytes_per_s": bw,
        "source": f"published peak per chip (dense bf16, HBM): {url}",
    }


def bound(flops: float, moved: float, peaks: dict[str, Any]) -> str | None:
    """``compute`` when the instruction's arithmetic intensity is past the ridge point
    of the peaks (FLOP/s over bytes/s), else ``memory``; None when it moves nothing."""
    if moved <= 0 or flops <= 0:
        return "memory" if moved > 0 else None
    ridge = peaks["flops_per_s"] / peaks["bytes_per_s"]
    return "compute" if flops / moved >= ridge else "memory"
