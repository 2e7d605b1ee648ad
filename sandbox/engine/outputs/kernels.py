"""The ``kernels`` output. Per ``pallas_call`` of the traced program (found in its
jaxpr, in nested jaxprs too): the kernel's jaxpr (source-linked), the Mosaic-TPU
module JAX prints for it lowered for ``tpu`` (``debug=True``; no libtpu needed), the
Triton IR JAX prints for it lowered for an NVIDIA GPU that is not there (an
``AbstractDevice`` of the request's ``gpu_target``, else H100; each ``loc`` mapped to
the kernel's lines), and the grid map: per operand, the block each grid point
reads or writes, from its BlockSpec's index map evaluated on every grid point.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from sandbox.engine.core import sources
from sandbox.engine.core.output import Output, Results
from sandbox.protocol.limits import MAX_GRID_POINTS, MAX_KERNELS, MAX_MESSAGE_CHARS
from sandbox.protocol.requests import SNIPPET_FILENAME

#: The GPU a Triton lowering is for when the request names no ``gpu_target``
DEFAULT_GPU_TARGET = "h100"
#: The TPU a Mosaic lowering is for (an ``AbstractDevice``: Mosaic's layout rules
#: depend on the TPU generation)
MOSAIC_TPU = ("TPU v5 lite", 1)
_SNIPPET_LINE = re.compile(re.escape(SNIPPET_FILENAME) + r'"?:(\d+)')
_LOC_DEF = re.compile(r"^#loc(\d+) = (.*)$")
_LOC_REF = re.compile(r"#loc(\d+)\b")


def _pallas_eqns(jaxpr: Any) -> Iterator[Any]:
    from jax._src import core
    from jax._src.pallas.pallas_call import pallas_call_p

    for eqn in jaxpr.eqns:
        if eqn.primitive is pallas_call_p:
            yield eqn
            continue
        for sub in core.jaxprs_in_params(eqn.params):
            yield from _pallas_eqns(sub)


def _jaxpr_of(closed: Any) -> Any:
    return getattr(closed, "jaxpr", closed)


def kernels_event(closed: Any, args: Any = ()) -> dict[str, Any]:
    """The ``kernels`` event of a traced program (``args``: the pipeline's arguments,
    on a ``gpu_target``'s device for a run that names one)."""
    notes: list[str] = []
    try:
        eqns = list(_pallas_eqns(_jaxpr_of(closed)))
    except ImportError:
        eqns = []
        notes.append("this JAX version has no Pallas")
    if not eqns:
        notes.append("no pallas_call in the traced program")
    if len(eqns) > MAX_KERNELS:
        notes.append(f"the first {MAX_KERNELS} of {len(eqns)} pallas_calls")
    target = _gpu_target_of(args)
    kernels = [_kernel(eqn, target) for eqn in eqns[:MAX_KERNELS]]
    if kernels:
        notes.append(
            "Mosaic GPU (pallas.mosaic_gpu) kernels are not lowered: their lowering needs "
            "a GPU device, which this worker does not have"
        )
    return {"type": "kernels", "kernels": kernels, "notes": notes}


def _kernel(eqn: Any, target: str) -> dict[str, Any]:
    params = eqn.params
    jaxpr = params["jaxpr"]
    info = jaxpr.debug_info
    text = str(jaxpr)
    kernel: dict[str, Any] = {
        "name": str(getattr(info, "func_src_info", None) or getattr(info, "func_name", ""))[:256],
        "line": _first_line(str(getattr(info, "func_src_info", ""))),
        "jaxpr": text,
        "jaxpr_sources": _safe(lambda: sources.jaxpr_sources(jaxpr, text), []),
        "notes": [],
    }
    kernel.update(grid_map(params["grid_mapping"]))
    avals = [v.aval for v in eqn.invars]
    modules: list[Any] = []
    mosaic, why = _lowered_text(
        params, avals, "tpu", MOSAIC_TPU, "The Mosaic module for pallas_call", modules
    )
    kernel["mosaic"] = mosaic
    kernel["mosaic_target"] = MOSAIC_TPU[0] if _has_abstract_device() else None
    kernel["mosaic_sources"] = []
    if mosaic is None:
        kernel["notes"].append(f"no Mosaic-TPU module: {why}")
    else:
        mapped, not_mapped = _safe(lambda: mosaic_sources(mosaic, modules), ([], "it failed"))
        kernel["mosaic_sources"] = mapped
        if not_mapped:
            kernel["notes"].append(f"the Mosaic module's lines are not mapped: {not_mapped}")
    device = _gpu_device(target)
    triton, why = _lowered_text(params, avals, "cuda", device, "The Triton module for pallas_call")
    kernel["triton"] = triton
    kernel["triton_target"] = device[0] if device and _has_abstract_device() else None
    kernel["triton_sources"] = _safe(lambda: triton_sources(triton), []) if triton else []
    if triton is None:
        kernel["notes"].append(f"no Triton IR: {why}")
    kernel["notes"] = [n[:MAX_MESSAGE_CHARS] for n in kernel["notes"]]
    return kernel


def _first_line(where: str) -> int | None:
    found = _SNIPPET_LINE.findall(where)
    return int(found[0]) if found else None


def _safe(fn: Any, default: Any) -> Any:
    try:
        return fn()
    except Exception as exc:
        print(
            f"jaxplay: kernel source mapping failed: {type(exc).__name__}: {exc}",
            file=sys.__stderr__,
        )
        return default


def _gpu_target_of(args: Any) -> str:
    """The GPU target the arguments are placed on (a ``gpu_target`` run's), else the
    default one."""
    import jax

    from sandbox.protocol.gpu_target_request import GPU_TARGETS

    kinds = {d[0]: name for name in GPU_TARGETS if (d := _gpu_device(name)) is not None}
    for leaf in jax.tree_util.tree_leaves(args):
        for device in getattr(getattr(leaf, "sharding", None), "device_set", ()):
            if device.platform in ("cuda", "gpu") and device.device_kind in kinds:
                return kinds[device.device_kind]
    return DEFAULT_GPU_TARGET


@functools.cache
def _gpu_device(target: str) -> tuple[str, int] | None:
    """The device kind and core count the target file states."""
    from sandbox.engine.core.gpu_target import target_config

    text = target_config(target)
    kind = re.search(r'^device_description_str: "([^"]*)"', text, re.M)
    cores = re.search(r"^\s*core_count: (\d+)", text, re.M)
    return (kind.group(1), int(cores.group(1))) if kind and cores else None


def _lowered_text(
    params: dict[str, Any],
    avals: list[Any],
    platform: str,
    device: tuple[str, int] | None,
    header: str,
    modules: list[Any] | None = None,
) -> tuple[str | None, str]:
    """What JAX prints after ``header`` when it lowers this one pallas_call for
    ``platform`` with ``debug=True``, under an abstract mesh of one ``device`` (its
    device kind and core count; no such device is here), and why not, when it cannot.
    ``modules``: a list that gets the Mosaic modules the lowering made."""
    import jax
    from jax._src.pallas.pallas_call import pallas_call_p

    bound = dict(params, interpret=False, debug=True)

    def one(*args: Any) -> Any:
        return pallas_call_p.bind(*args, **bound)

    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
    printed = io.StringIO()
    try:
        with contextlib.ExitStack() as stack:
            if modules is not None:
                stack.enter_context(_capturing_mosaic_modules(modules))
            stack.enter_context(contextlib.redirect_stdout(printed))
            stack.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore")  # the Triton backend's deprecation notice
            if device is not None and not _has_abstract_device():
                if platform != "tpu":  # Mosaic-TPU lowers for no TPU in particular then
                    return None, (
                        f"this JAX version ({jax.__version__}) cannot lower for a {platform} "
                        "device it does not have (no jax.sharding.AbstractDevice)"
                    )
            elif device is not None:
                from jax.sharding import AbstractDevice, AbstractMesh

                kind, cores = device
                abstract = AbstractDevice(device_kind=kind, num_cores=cores, platform=platform)
                mesh = AbstractMesh((1,), ("x",), abstract_device=abstract)
                stack.enter_context(jax.sharding.use_abstract_mesh(mesh))
            jax.jit(one).trace(*shapes).lower(lowering_platforms=(platform,))
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"[:2000]
    return module_after(printed.getvalue(), header)


def _has_abstract_device() -> bool:
    import jax.sharding

    return hasattr(jax.sharding, "AbstractDevice")


@contextlib.contextmanager
def _capturing_mosaic_modules(modules: list[Any]) -> Iterator[None]:
    """Each Mosaic module Pallas's TPU lowering makes meanwhile, appended to
    ``modules`` (the module attribute it calls is JAX's own again afterwards)."""
    try:
        from jax._src.pallas.mosaic import lowering
    except ImportError:
        yield
        return
    original = getattr(lowering, "lower_jaxpr_to_pipelined_module", None)
    if original is None:
        yield
        return

    @functools.wraps(original)
    def capture(*args: Any, **kwargs: Any) -> Any:
        module = original(*args, **kwargs)
        modules.append(module)
        return module

    lowering.lower_jaxpr_to_pipelined_module = capture
    try:
        yield
    finally:
        lowering.lower_jaxpr_to_pipelined_module = original


def mosaic_sources(text: str, modules: list[Any]) -> tuple[list[dict[str, int]], str | None]:
    """``{out_line, line}`` for the Mosaic module JAX printed (``text``), from the same
    module printed with its locations (JAX prints it without); or why not."""
    if not modules:
        return [], "this JAX version's Mosaic lowering could not be followed"
    if len(modules) != 1:
        return [], f"{len(modules)} Mosaic modules were made for one kernel"
    op = modules[0].operation
    if op.get_asm(use_name_loc_as_prefix=True).strip("\n") != text.strip("\n"):
        return [], "the module printed again is not the text JAX printed"
    located = op.get_asm(use_name_loc_as_prefix=True, enable_debug_info=True)
    body = [i for i, t in enumerate(located.split("\n")) if not t.startswith("#loc")]
    lines = {s["out_line"] - 1: s["line"] for s in triton_sources(located)}
    if len(body) < len(text.strip("\n").split("\n")):
        return [], "the module printed with its locations has other lines"
    out = [
        {"out_line": n + 1, "line": lines[i]}
        for n, i in enumerate(body[: len(text.strip("\n").split("\n"))])
        if i in lines
    ]
    return out, None


def module_after(printed: str, header: str) -> tuple[str | None, str]:
    """The module printed after the line that starts with ``header`` (to the end of
    the print, one blank line trimmed)."""
    start = printed.find("\n" + header)
    if start < 0:
        return None, "JAX printed no module"
    body = printed[printed.index("\n", start + 1) + 1 :]
    # the next section JAX prints (if any) starts with "\nThe "
    end = body.find("\n\nThe ")
    body = body if end < 0 else body[: end + 1]
    return body.rstrip("\n") + "\n", ""


def triton_sources(text: str) -> list[dict[str, int]]:
    """``{out_line, line}`` for each line of a Triton module printed with pretty debug
    info whose ``#locN`` (followed through named locations) is a snippet line."""
    lines = text.split("\n")
    defs: dict[str, str] = {}
    for line in lines:
        m = _LOC_DEF.match(line)
        if m:
            defs[m.group(1)] = m.group(2)

    @functools.cache
    def resolve(name: str, depth: int = 0) -> int | None:
        body = defs.get(name, "")
        direct = _SNIPPET_LINE.findall(body)
        if direct:
            return int(direct[0])
        if depth > 32:
            return None
        for ref in _LOC_REF.findall(body):
            found = resolve(ref, depth + 1)
            if found is not None:
                return found
        return None

    out: list[dict[str, int]] = []
    for index, line in enumerate(lines):
        if line.startswith("#loc"):
            continue
        at = _SNIPPET_LINE.findall(line)
        found = int(at[0]) if at else None
        for ref in _LOC_REF.findall(line) if found is None else ():
            found = resolve(ref)
            if found is not None:
                break
        if found is not None:
            out.append({"out_line": index + 1, "line": found})
    return out


# --- the grid map ---------------------------------------------------------------------


def grid_map(grid_mapping: Any) -> dict[str, Any]:
    """The grid and, per operand, the element offsets of the block each grid point
    reads (inputs) or writes (outputs): each BlockSpec's index map evaluated on every
    grid point (row-major), up to MAX_GRID_POINTS of them."""
    import itertools

    grid = tuple(grid_mapping.grid)
    result: dict[str, Any] = {"grid": [], "points": 0, "operands": [], "grid_notes": []}
    if not all(isinstance(g, int) for g in grid):
        result["grid_notes"].append("the grid has dynamic bounds: no grid map")
        return result
    result["grid"] = list(grid)
    total = 1
    for g in grid:
        total *= g
    points = list(itertools.islice(itertools.product(*(range(g) for g in grid)), MAX_GRID_POINTS))
    result["points"] = len(points)
    if total > len(points):
        result["grid_notes"].append(
            f"the grid has {total:,} points: the map shows the first {len(points):,} (row-major)"
        )
    if grid_mapping.num_index_operands:
        result["grid_notes"].append(
            "the index maps read scalar-prefetch operands (values known only when it runs): "
            "no grid map"
        )
        points = []
    num_inputs = grid_mapping.num_inputs
    for i, bm in enumerate(grid_mapping.block_mappings):
        kind = (
            "in"
            if i < num_inputs
            else "out"
            if i < num_inputs + grid_mapping.num_outputs
            else "scratch"
        )
        block = [_block_size(d) for d in bm.block_shape]
        # the whole array (``array_shape_dtype`` before JAX 0.7)
        array = getattr(bm, "array_aval", None) or bm.array_shape_dtype
        operand: dict[str, Any] = {
            "origin": str(bm.origin)[:256],
            "kind": kind,
            "shape": [int(n) for n in array.shape],
            "dtype": str(array.dtype),
            "block_shape": block,
            "starts": [],
        }
        if points:
            operand["starts"] = _starts(bm, points)
        result["operands"].append(operand)
    return result


def _block_size(dim: Any) -> int:
    """A block dimension's size: an int (older JAX), a ``Blocked``/``Element``/...
    with its ``block_size``, else 1 (squeezed, mapped)."""
    if isinstance(dim, int):
        return dim
    size = getattr(dim, "block_size", None)
    return size if isinstance(size, int) else 1


def _index_scale(dim: Any, bm: Any) -> int:
    """What a block index counts along ``dim``: blocks (``Blocked``, and an int of an
    older JAX unless the mapping's indexing mode is ``Unblocked``) or elements."""
    if isinstance(dim, int):
        return 1 if type(getattr(bm, "indexing_mode", None)).__name__ == "Unblocked" else dim
    return _block_size(dim) if type(dim).__name__ == "Blocked" else 1


def block_indices(bm: Any, points: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """``bm``'s index map at each grid point (one vectorised call over them all; the
    values are those of calling it point by point)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src import core

    fun = core.jaxpr_as_fun(bm.index_map_jaxpr)
    if not points or not points[0]:  # no grid: one point, the index map of nothing
        return [tuple(int(v) for v in fun())] * len(points)
    columns = [jnp.asarray(c, dtype=jnp.int32) for c in zip(*points, strict=True)]
    out = jax.vmap(lambda *idx: tuple(fun(*idx)))(*columns)
    rows = np.stack([np.broadcast_to(np.asarray(o), (len(points),)) for o in out], axis=1)
    return [tuple(int(v) for v in row) for row in rows]


def _starts(bm: Any, points: list[tuple[int, ...]]) -> list[list[int]]:
    indices = block_indices(bm, points)
    scale = [_index_scale(d, bm) for d in bm.block_shape]
    return [[i * s for i, s in zip(idx, scale, strict=True)] for idx in indices]


def kernels_events(r: Results) -> dict[str, Any]:
    return kernels_event(r.closed, r.pipeline.run.args)


OUTPUT = Output("traced", "lowering the Pallas kernels", kernels_events)
