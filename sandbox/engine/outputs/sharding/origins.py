"""Which sharding forced each collective: Shardy's sharding origins.

XLA's HLO metadata on a collective names the operation that needed it (``op_name``,
the line), never which sharding made that operation's operands and result disagree.
Shardy (JAX's partitioner's propagation, ``jax_use_shardy_partitioner``, on by default
since JAX 0.7) can record it: its propagation passes take ``debug-sharding-origins``,
which writes on every value, per mesh axis, the user sharding that axis came from
(``sdy.sharding_origins = {x = "input: 0"}``; a ``with_sharding_constraint`` is named
``constraint_N`` by ``sdy.sharding_origin_name``; ``output: N`` a result's). XLA's
compile does not keep them, so the lowered module is propagated here a second time,
with that option, by the same passes JAX's jaxlib registers (``sdy-import-pipeline``,
``sdy-user-priority-propagate``), in JAX's own MLIR context.

A collective in the per-device HLO carries the ``op_name`` of the operation it serves
(JAX's name location of that op in StableHLO, or an argument's name for a reshard of
an argument). At that operation two sides meet: ``from``, the origins of its operands'
shardings, and ``to``, the origins of its result's sharding and of a
``with_sharding_constraint`` or output that takes its result to another sharding; a
collective with no metadata at the program's root is the outputs' reshard. An origin
on both sides is the flow itself, and is kept on ``to`` only. A collective whose
operation is itself a collective in StableHLO (``lax.psum`` in a ``shard_map``) is the
code's own: ``written``, no sharding forced it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sandbox.protocol.requests import SNIPPET_FILENAME

PASSES = (
    "builtin.module(sdy-import-pipeline,sdy-user-priority-propagate{debug-sharding-origins=true})"
)
_NAME_LOC = re.compile(r'^loc\("((?:[^"\\]|\\.)*)"')
_SNIPPET_LINE = re.compile(r'"' + re.escape(SNIPPET_FILENAME) + r'":(\d+)')
_ORIGIN_ENTRY = re.compile(r'(\w+) = "([^"]*)"')
_DIMS = re.compile(r"\[(.*)\]")
#: StableHLO's collectives: one in the lowered module is the code's own
_COLLECTIVE_OPS = frozenset(
    f"stablehlo.{name}"
    for name in ("all_reduce", "all_gather", "all_to_all", "reduce_scatter", "collective_permute")
)
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')


def location_name(location: str) -> str | None:
    """The name JAX gave an op or argument in its MLIR location (``loc("jit(f)/sin"(...))``)."""
    match = _NAME_LOC.match(location)
    return match.group(1) if match else None


def location_line(location: str) -> int | None:
    """The first line of the user's snippet a location names."""
    match = _SNIPPET_LINE.search(location)
    return int(match.group(1)) if match else None


def spec_text(sharding: str) -> str:
    """A Shardy sharding (``#sdy.sharding<@mesh, [{"x"}, {}]>``) as a PartitionSpec
    (``P('x', None)``); an open dimension's ``?`` is dropped (it only says propagation
    may still shard it)."""
    match = _DIMS.search(sharding)
    if match is None:
        return sharding[:256]
    dims = re.findall(r"\{([^}]*)\}", match.group(1))
    entries = []
    for dim in dims:
        axes = re.findall(r'"([^"]+)"', dim)
        if not axes:
            entries.append("None")
        elif len(axes) == 1:
            entries.append(repr(axes[0]))
        else:
            entries.append("(" + ", ".join(repr(a) for a in axes) + ")")
    return f"P({', '.join(entries)})"


def _origins(attribute: Any) -> dict[str, str]:
    """``{axis: origin}`` of an ``sdy.sharding_origins`` (a dict, or per result a list
    of them: all results' merged)."""
    return dict(_ORIGIN_ENTRY.findall(str(attribute))) if attribute is not None else {}


def _attr(attributes: Any, name: str) -> Any:
    """An MLIR attribute map's (or dictionary attribute's) entry; None when absent
    (neither has ``get``)."""
    try:
        return attributes[name]
    except (KeyError, IndexError, ValueError):
        return None


@dataclass
class Site:
    """An operation (or an argument, or the outputs) collectives are placed for."""

    sources: dict[str, set[str]] = field(default_factory=dict)
    targets: dict[str, set[str]] = field(default_factory=dict)
    #: a constraint that takes the site's result to another sharding
    reshards: dict[str, set[str]] = field(default_factory=dict)
    #: the site is a with_sharding_constraint: its result has its own sharding
    constraint: bool = False
    #: the site is a collective the code wrote (lax.psum in a shard_map)
    written: bool = False


@dataclass
class Propagation:
    """Shardy's origins of one lowered module: each origin's description, and the
    sites keyed by the name XLA's metadata gives them and their user line (two
    constraints share the name ``jit(f)/sharding_constraint``)."""

    origins: dict[str, dict[str, Any]] = field(default_factory=dict)
    sites: dict[tuple[str, int | None], Site] = field(default_factory=dict)
    outputs: Site = field(default_factory=Site)

    def site(self, name: str, line: int | None) -> Site | None:
        """The site of that name at that line; else the only one of that name (or,
        for a name JAX gave relative to a shard_map or a called function, ending so)."""
        if (name, line) in self.sites:
            return self.sites[(name, line)]
        named = [(at, site) for (n, at), site in self.sites.items() if n == name]
        if not named:  # inside a shard_map or a called function, named relative to it
            named = [(at, s) for (n, at), s in self.sites.items() if name.endswith("/" + n)]
        if len(named) > 1 and line is not None:
            named = [(at, site) for at, site in named if at == line]
        return named[0][1] if len(named) == 1 else None

    def origin_of(
        self, collective_line: str, is_root: bool, line: int | None
    ) -> dict[str, Any] | None:
        match = _OP_NAME.search(collective_line)
        outputs = self.outputs if is_root else None
        site = self.site(match.group(1), line) if match else outputs
        if site is None:
            return None
        if site.written:
            return {"from": [], "to": [], "written": True}
        if site.reshards:  # its result flows on, then a constraint reshards it
            to = site.reshards
            had = site.targets if site.constraint else {**site.sources, **site.targets}
            sources = {k: v for k, v in had.items() if k not in to}
        else:
            to = site.targets
            sources = {k: v for k, v in site.sources.items() if k not in to}
        found = {"from": _listed(self.origins, sources), "to": _listed(self.origins, to)}
        return {**found, "written": False}


def _listed(origins: dict[str, dict[str, Any]], axes: dict[str, set[str]]) -> list[dict[str, Any]]:
    out = []
    for name in sorted(axes):
        described = origins.get(name) or {"kind": "unknown", "name": name, "line": None}
        out.append({**described, "axes": sorted(axes[name])})
    return out


def _add(into: dict[str, set[str]], origins: dict[str, str], self_name: str | None = None) -> None:
    for axis, origin in origins.items():
        name = self_name if origin == "self" and self_name else origin
        into.setdefault(name, set()).add(axis)


def propagate(
    lowered_text: str, arg_paths: list[str], out_paths: list[str], entry_line: int | None
) -> Propagation:
    """Shardy's propagation of a lowered module (its text with debug locations) with
    sharding origins recorded, read into sites. Raises what MLIR raises when this
    jaxlib lacks the passes or their option."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir, passmanager

    with jax_mlir.make_ir_context():
        module = ir.Module.parse(lowered_text)
        passmanager.PassManager.parse(PASSES).run(module.operation)
        return _read(module, arg_paths, out_paths, entry_line)


def _read(
    module: Any, arg_paths: list[str], out_paths: list[str], entry_line: int | None
) -> Propagation:
    found = Propagation()
    main = next(
        op
        for op in module.body.operations
        if "sym_name" in op.attributes and op.attributes["sym_name"].value == "main"
    )
    # an argument's or output's sharding is declared with the entry (its ``def``)
    main_line = entry_line
    # the arguments' and results' own shardings and origins, from the function's attributes
    arg_attrs = _attr(main.attributes, "arg_attrs") or []
    res_attrs = _attr(main.attributes, "res_attrs") or []
    block = main.regions[0].blocks[0]
    producers: dict[Any, dict[str, str]] = {}
    site_of: dict[Any, Site] = {}
    for index, argument in enumerate(block.arguments):
        attrs = arg_attrs[index] if index < len(arg_attrs) else {}
        name = f"input: {index}"
        sharding = _attr(attrs, "sdy.sharding")
        # JAX names an argument's location after its parameter (``a``, ``params['w']``)
        called = location_name(str(argument.location))
        path = arg_paths[index] if index < len(arg_paths) else f"argument {index}"
        found.origins[name] = {
            "kind": "argument",
            "name": called or path,
            "line": main_line,
            "sharding": spec_text(str(sharding)) if sharding is not None else "P()",
        }
        own = _origins(_attr(attrs, "sdy.sharding_origins"))
        producers[argument] = {a: (name if o == "self" else o) for a, o in own.items()}
        site = found.sites.setdefault((called or name, None), Site())
        _add(site.sources, producers[argument])
    for index in range(len(res_attrs)):
        sharding = _attr(res_attrs[index], "sdy.sharding")
        found.origins[f"output: {index}"] = {
            "kind": "output",
            "name": out_paths[index] if index < len(out_paths) else f"output {index}",
            "line": main_line,
            "sharding": spec_text(str(sharding)) if sharding is not None else "P()",
        }
    functions = {
        str(op.attributes["sym_name"]).strip('"'): op
        for op in module.body.operations
        if op.operation.name == "func.func" and "sym_name" in op.attributes
    }
    # main first, then each function it calls (a nested jit, or JAX's own helpers as
    # jnp.cumsum's), in call order: a called function's argument has the origins of
    # what its first caller passed (else its own), so a reshard at the call is seen
    calls: dict[str, list[dict[str, str]]] = {}
    _read_ops(found, block, functions, producers, site_of, calls, main=True)
    done = {"main"}
    while pending := [n for n in calls if n not in done and n in functions]:
        name = pending[0]
        done.add(name)
        function = functions[name]
        if not len(function.regions) or not len(function.regions[0].blocks):
            continue
        inner = function.regions[0].blocks[0]
        inner_attrs = _attr(function.attributes, "arg_attrs") or []
        for index, argument in enumerate(inner.arguments):
            attrs = inner_attrs[index] if index < len(inner_attrs) else {}
            passed = calls[name][index] if index < len(calls[name]) else {}
            producers[argument] = passed or _origins(_attr(attrs, "sdy.sharding_origins"))
        _read_ops(found, inner, functions, producers, site_of, calls, main=False)
    return found


def _read_ops(
    found: Propagation,
    block: Any,
    functions: dict[str, Any],
    producers: dict[Any, dict[str, str]],
    site_of: dict[Any, Site],
    calls: dict[str, list[dict[str, str]]],
    *,
    main: bool,
) -> None:
    """The sites and origins of one function's operations (``main``: the entry's,
    whose return is the outputs)."""
    for op in _operations(block):
        own = _origins(_attr(op.attributes, "sdy.sharding_origins"))
        constraint = _attr(op.attributes, "sdy.sharding_origin_name")
        constraint_name = str(constraint).strip('"') if constraint is not None else None
        if constraint_name is not None:
            found.origins[constraint_name] = {
                "kind": "constraint",
                "name": "with_sharding_constraint",
                "line": location_line(str(op.location)),
                "sharding": spec_text(str(_attr(op.attributes, "sharding"))),
            }
        resolved = {
            a: (constraint_name if o == "self" and constraint_name else o) for a, o in own.items()
        }
        operand_origins: dict[str, set[str]] = {}
        for operand in op.operands:
            _add(operand_origins, producers.get(operand, {}))
        for result in op.results:
            producers[result] = resolved
        if op.operation.name == "func.call":  # its results: the called function's result origins
            callee_name = str(_attr(op.attributes, "callee")).lstrip("@")
            calls.setdefault(callee_name, [producers.get(o, {}) for o in op.operands])
            callee = functions.get(callee_name)
            results = _attr(callee.attributes, "res_attrs") if callee is not None else None
            for index, result in enumerate(op.results):
                attrs = results[index] if results is not None and index < len(results) else {}
                producers[result] = _origins(_attr(attrs, "sdy.sharding_origins"))
        if op.operation.name == "func.return" and not main:
            continue
        if op.operation.name == "func.return":
            for index, operand in enumerate(op.operands):
                _add(found.outputs.sources, producers.get(operand, {}))
                found.outputs.targets.setdefault(f"output: {index}", set())
            continue
        op_name = location_name(str(op.location))
        if op_name is None:
            continue
        site = found.sites.setdefault((op_name, location_line(str(op.location))), Site())
        site.constraint = site.constraint or constraint_name is not None
        site.written = site.written or op.operation.name in _COLLECTIVE_OPS
        for origin, axes in operand_origins.items():
            site.sources.setdefault(origin, set()).update(axes)
        _add(site.targets, resolved)
        for result in op.results:
            site_of[result] = site
        if constraint_name is not None:
            # the op whose result the constraint takes elsewhere: the constraint is its `to`
            for operand in op.operands:
                if (producer := site_of.get(operand)) is not None:
                    _add(producer.reshards, resolved)


def _operations(block: Any) -> list[Any]:
    """Every operation of a block and of the regions inside its operations, in order."""
    ops = []
    for op in block.operations:
        ops.append(op)
        for region in op.regions:
            for inner in region.blocks:
                ops.extend(_operations(inner))
    return ops
