"""The ``sharding`` output: how the compiled program is laid out over the devices,
which device holds which block of each argument and output, every collective in the
per-device HLO, and the partitioner's involuntary full rematerializations
(core/rematerializations.py, which the remarks output reads too)."""

from __future__ import annotations

import math
import re
from typing import Any

from sandbox.engine.core.compat import out_info
from sandbox.engine.core.output import Output, Results
from sandbox.engine.core.rematerializations import rematerializations
from sandbox.engine.core.sources import hlo_sources
from sandbox.engine.outputs.sharding.origins import propagate
from sandbox.protocol.limits import MAX_COLLECTIVES, MAX_SHARD_BLOCKS
from sandbox.protocol.requests import SNIPPET_FILENAME

#: the collectives of XLA's HLO; ``-start`` forms (async) count as their op
COLLECTIVE_KINDS = (
    "all-gather",
    "all-reduce",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
)
_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?[\w.-]+\s*=\s*(?P<shape>.+?)\s+"
    r"(?P<kind>all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)"
    r"(?:-start)?\("
)
_ARRAY_SHAPE = re.compile(r"\b(?P<dtype>[a-z]+\d*(?:e\d+m\d+\w*)?)\[(?P<dims>[\d,]*)\]")
_GROUPS_LIST = re.compile(r"replica_groups=\{((?:\{[\d,]*\},?)*)\}")
_GROUPS_IOTA = re.compile(r"replica_groups=\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?")
_GROUPS_MESH = re.compile(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}")
_PAIRS = re.compile(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}")
_MESH_AXIS = re.compile(r"'?([\w]+)'?=(\d+)")
_BITS = {"pred": 8, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "f16": 16, "bf16": 16}
_BITS.update(
    {"s32": 32, "u32": 32, "f32": 32, "s64": 64, "u64": 64, "f64": 64, "c64": 64, "c128": 128}
)


def _spec_json(sharding: Any) -> list[Any] | None:
    spec = getattr(sharding, "spec", None)
    if spec is None:
        return None
    return [list(e) if isinstance(e, tuple) else e for e in spec]


def _grid(sharding: Any, shape: tuple[int, ...]) -> list[dict[str, Any]]:
    """Blocks of the array, each with the devices that hold it (several: replicated)."""
    blocks: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for device, index in sharding.devices_indices_map(tuple(shape)).items():
        bounds = tuple(
            (s.start or 0, dim if s.stop is None else s.stop)
            for s, dim in zip(index, shape, strict=False)
        )
        blocks.setdefault(bounds, []).append(int(device.id))
    return [
        {"start": [b[0] for b in bounds], "stop": [b[1] for b in bounds], "devices": sorted(ids)}
        for bounds, ids in sorted(blocks.items())[:MAX_SHARD_BLOCKS]
    ]


def _entries(shardings: Any, avals: list[Any], paths: list[str]) -> list[dict[str, Any]]:
    import jax

    out = []
    leaves = jax.tree_util.tree_leaves(
        shardings, is_leaf=lambda s: hasattr(s, "devices_indices_map")
    )
    for path, aval, sharding in zip(paths, avals, leaves, strict=False):
        shape = tuple(int(d) for d in getattr(aval, "shape", ()))
        out.append(
            {
                "path": path,
                "shape": list(shape),
                "dtype": str(getattr(aval, "dtype", "")),
                "spec": _spec_json(sharding),
                "sharding": type(sharding).__name__,
                "grid": _grid(sharding, shape),
            }
        )
    return out


def sharding_event(
    compiled: Any, lowered: Any, compile_log: str = "", entry_line: int | None = None
) -> dict[str, Any]:
    """The ``sharding`` output of one compiled pipeline (``compile_log``: what XLA's
    C++ logs said while it compiled, core/compile_log.py; ``entry_line``: the user's
    ``def`` of the entry, where its arguments' and outputs' shardings are declared)."""
    import jax

    args_info = compiled.args_info
    flat_args = jax.tree_util.tree_flatten_with_path(
        args_info[0] if isinstance(args_info, tuple) else args_info
    )[0]
    arg_paths = [jax.tree_util.keystr(p) for p, _ in flat_args]
    arg_avals = [getattr(info, "_aval", info) for _, info in flat_args]
    in_shardings = compiled.input_shardings[0]
    flat_out = jax.tree_util.tree_flatten_with_path(out_info(compiled, lowered))[0]
    out_paths = [jax.tree_util.keystr(p) for p, _ in flat_out]
    out_avals = [info for _, info in flat_out]
    text = compiled.as_text()
    found = collectives(text)
    note = with_origins(found, text, lowered, arg_paths, out_paths, entry_line)
    return {
        "type": "sharding",
        "devices": _device_count(compiled),
        "arguments": _entries(in_shardings, arg_avals, arg_paths),
        "outputs": _entries(compiled.output_shardings, out_avals, out_paths),
        "collectives": found,
        "origins_note": note,
        "rematerializations": rematerializations(compile_log, text),
    }


def with_origins(
    found: list[dict[str, Any]],
    text: str,
    lowered: Any,
    arg_paths: list[str],
    out_paths: list[str],
    entry_line: int | None,
) -> str | None:
    """Give each collective its ``origin`` (origins.py): Shardy's sharding origins at
    the operation it serves. What stands in the way, when something does, is the note
    returned (each collective's origin then null)."""
    import jax

    for item in found:
        item["origin"] = None
    if not found:
        return None
    if not getattr(jax.config, "jax_use_shardy_partitioner", False):
        return (
            f"JAX {jax.__version__} partitions with GSPMD (jax_use_shardy_partitioner is "
            "off), whose propagation records no sharding origins: each collective's "
            "line is the operation that needed it, not the sharding that forced it"
        )
    try:
        propagation = propagate(lowered.as_text(debug_info=True), arg_paths, out_paths, entry_line)
    except Exception as exc:  # this jaxlib lacks the passes or their option
        return (
            f"Shardy on JAX {jax.__version__} could not record sharding origins "
            f"(sdy-user-priority-propagate{{debug-sharding-origins}}): "
            f"{type(exc).__name__}: {str(exc)[:300]}"
        )
    lines = text.split("\n")
    unmatched = 0
    for item in found:
        line = lines[item["hlo_line"] - 1]
        root = line.lstrip().startswith("ROOT")
        item["origin"] = propagation.origin_of(line, root, item["line"])
        unmatched += item["origin"] is None
    if unmatched:
        return (
            f"{unmatched} collective(s) name no operation Shardy propagated (no op_name, "
            "or one JAX's StableHLO does not carry): their origin is null"
        )
    return None


def _device_count(compiled: Any) -> int:
    for sharding in compiled.input_shardings[0] or ():
        return len(sharding.device_set)
    import jax

    leaves = jax.tree_util.tree_leaves(
        compiled.output_shardings, is_leaf=lambda s: hasattr(s, "device_set")
    )
    return len(leaves[0].device_set) if leaves else 1


def collectives(text: str) -> list[dict[str, Any]]:
    """Every collective of a compiled (per-device) HLO text: its kind, the bytes of
    its result on one device, its groups of devices, and the user's line."""
    lines = {s["out_line"]: s["line"] for s in hlo_sources(text)}
    found = []
    for index, line in enumerate(text.split("\n")):
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        groups, groups_text = _groups(line)
        found.append(
            {
                "kind": match.group("kind"),
                "bytes": _bytes(match.group("shape")),
                "shape": match.group("shape").strip()[:256],
                "replica_groups": groups,
                "groups_text": groups_text[:256],
                "line": lines.get(index + 1),
                "hlo_line": index + 1,
            }
        )
        if len(found) >= MAX_COLLECTIVES:
            break
    return found


def _bytes(shape: str) -> int:
    total = 0
    for match in _ARRAY_SHAPE.finditer(shape.split("{")[0] if "(" not in shape else shape):
        bits = _BITS.get(match.group("dtype"))
        if bits is None:
            continue
        dims = [int(d) for d in match.group("dims").split(",") if d]
        total += math.prod(dims) * bits // 8
    return total


def _groups(line: str) -> tuple[list[list[int]] | None, str]:
    """The groups of devices that take part together, from any of XLA's spellings:
    explicit lists, iota (``[2,2]<=[4]``, ``[2,2]<=[2,2]T(1,0)``), mesh axes
    (``mesh['x'=2,'y'=2] {'x'}``); a collective-permute's (source, target) pairs."""
    import numpy as np

    if match := _PAIRS.search(line):
        pairs = re.findall(r"\{(\d+),(\d+)\}", match.group(1))
        return [[int(a), int(b)] for a, b in pairs], match.group(0)
    if match := _GROUPS_LIST.search(line):
        groups = re.findall(r"\{([\d,]*)\}", match.group(1))
        return [[int(d) for d in g.split(",") if d] for g in groups], match.group(0)
    if match := _GROUPS_IOTA.search(line):
        out_shape = [int(d) for d in match.group(1).split(",")]
        dims = [int(d) for d in match.group(2).split(",")]
        ids = np.arange(math.prod(dims)).reshape(dims)
        if match.group(3):
            ids = ids.transpose([int(d) for d in match.group(3).split(",")])
        return ids.reshape(out_shape).tolist(), match.group(0)
    if match := _GROUPS_MESH.search(line):
        axes = [(name, int(size)) for name, size in _MESH_AXIS.findall(match.group(1))]
        grouped = set(re.findall(r"[\w]+", match.group(2)))
        names = [name for name, _ in axes]
        ids = np.arange(math.prod(size for _, size in axes)).reshape([size for _, size in axes])
        inner = [i for i, name in enumerate(names) if name in grouped]
        outer = [i for i in range(len(names)) if i not in inner]
        size = math.prod(axes[i][1] for i in inner)
        return ids.transpose(outer + inner).reshape(-1, size).tolist(), match.group(0)
    return None, ""


def sharding_events(r: Results) -> dict[str, Any]:
    entry = getattr(r.pipeline.run.entry, "__code__", None)
    line = entry.co_firstlineno if entry and entry.co_filename == SNIPPET_FILENAME else None
    return sharding_event(r.compiled, r.lowered, r.compile_log, line)


OUTPUT = Output("compiled", "describing the shardings", sharding_events)
