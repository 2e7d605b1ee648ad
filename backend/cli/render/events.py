"""Readable text for a stream of events (``jaxplay run`` without ``--json``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from backend.app.relay.timeouts import LONGEST
from backend.cli.render.autodiff import autodiff_text
from backend.cli.render.checks import checks_text
from backend.cli.render.kernels import kernels_text
from backend.cli.render.memory import memory_text
from backend.cli.render.numerics import numerics_text
from backend.cli.render.trace_values import trace_values_text
from backend.cli.render.understand import export_text, recompiles_text
from sandbox.protocol.limits import MAX_LEAVES, MAX_VALUE_DATA

HEADINGS = {"jaxpr": "jaxpr", "stablehlo": "StableHLO", "hlo": "HLO (optimised)"}


def _pipeline_tag(event: dict[str, Any]) -> str:
    pipeline = event.get("pipeline", "main")
    return "" if pipeline == "main" else f" [compare {pipeline}]"


def _fmt_ms(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _fmt_bytes(value: Any) -> str:
    return "-" if value is None else f"{value:,} B"


def _ir_text(event: dict[str, Any]) -> str:
    # a text in parts: its first part here (without the line saying what follows),
    # the rest as its ``text_part`` events arrive
    if event.get("parts"):  # cut only its last newline: the next part goes on from there
        text = event["text"][: event["shown_chars"]].removesuffix("\n")
    else:
        text = event["text"].rstrip()
    return f"── {HEADINGS[event['type']]}{_pipeline_tag(event)} ──\n{text}"


def _value(event: dict[str, Any]) -> str:
    lines = [f"── value{_pipeline_tag(event)} ──", event["repr"]]
    for leaf in event.get("tree", []):
        lines.append(
            f"  {leaf['path'] or '(root)'}: {leaf['dtype']}{leaf['shape']} sha256={leaf['sha256'][:16]}…"
        )
    page = value_page_text(event)
    return "\n".join(lines + ([f"  {page}"] if page else []))


def value_page_text(event: dict[str, Any]) -> str | None:
    """Which leaves the value event describes, when not all of them or not all their
    data: ``leaves 1–4096 of 5000 (--value-from 4096 for more)``; None when whole."""
    total, first = event.get("total_leaves"), event.get("first_leaf") or 0
    if total is None:  # a worker before value pages: the tree is the value's first leaves
        return None
    shown, stops = len(event.get("tree", [])), event.get("data_stops_at")
    if shown == 0 and first >= total:
        return f"no leaves from {first}: the value has {total} (--value-from 0 for the first)"
    parts: list[str] = []
    if first > 0 or first + shown < total:
        more = f"--value-from {first + shown} for more" if first + shown < total else ""
        back = f"--value-from {max(0, first - MAX_LEAVES)} for the ones before" if first else ""
        hints = "; ".join(h for h in (more, back) if h)
        parts.append(
            f"leaves {first + 1}–{first + shown} of {total}" + (f" ({hints})" if hints else "")
        )
    if stops is not None:
        parts.append(
            f"data for leaves {stops + 1}–{first + shown} past the {MAX_VALUE_DATA:,}-element "
            f"budget (--value-from {stops} for it)"
        )
    return "; ".join(parts) or None


def _cost(event: dict[str, Any]) -> str:
    mem = event.get("memory") or {}
    text = (
        f"── cost{_pipeline_tag(event)} ──\n  flops {event.get('flops')}  transcendentals {event.get('transcendentals')}"
        f"  bytes accessed {event.get('bytes_accessed')}\n  memory: arguments {_fmt_bytes(mem.get('argument'))}"
        f", output {_fmt_bytes(mem.get('output'))}, temp {_fmt_bytes(mem.get('temp'))}"
    )
    before = event.get("before")
    if before:
        text += (
            f"\n  before optimisation: flops {before.get('flops')}  transcendentals"
            f" {before.get('transcendentals')}  bytes accessed {before.get('bytes_accessed')}"
        )
    return text + "".join(f"\n  note: {note}" for note in event.get("notes") or [])


def _timing(event: dict[str, Any]) -> str:
    lines = [
        "── timing (ms per call) ──",
        f"  {'':40} {'compile':>9} {'median':>9} {'min':>9} {'IQR':>9} {'runs':>7}",
    ]
    for row in event.get("rows", []):
        lines.append(
            f"  {row['label'][:40]:40} {_fmt_ms(row.get('compile_ms')):>9} {_fmt_ms(row['median_ms']):>9}"
            f" {_fmt_ms(row['min_ms']):>9} {_fmt_ms(row['iqr_ms']):>9} {row['runs']:>7}"
        )
    lines += [f"  note: {note}" for note in event.get("notes", [])]
    return "\n".join(lines)


def _notes(event: dict[str, Any]) -> list[str]:
    return [f"  note: {note}" for note in event.get("notes") or []]


def _passes(event: dict[str, Any]) -> str:
    """The pass list (the texts are for ``--json`` and the page)."""
    items = event.get("items", [])
    lines = [f"── passes{_pipeline_tag(event)}: {len(items)} changed the module ──"]
    for i, item in enumerate(items):
        size = f"{len(item['text'])} chars" if item.get("text") is not None else "diff"
        lines.append(f"  {i:4}  {item['pipeline']} / {item['pass']}  ({size})")
    return "\n".join(lines + _notes(event))


def _asm(event: dict[str, Any]) -> str:
    lines = [f"── asm{_pipeline_tag(event)} ──"]
    for kernel in event.get("kernels", []):
        where = f" (lines {', '.join(map(str, kernel['lines']))})" if kernel.get("lines") else ""
        lines.append(f"; {kernel['name']} ← {kernel.get('fusion') or '?'}{where}")
        lines.append(kernel["asm"].rstrip())
    return "\n".join(lines + _notes(event))


def _memory(event: dict[str, Any]) -> str:
    return memory_text(event, _pipeline_tag(event), _notes(event))


def _remarks(event: dict[str, Any]) -> str:
    lines = [f"── remarks{_pipeline_tag(event)} ──"]
    for item in event.get("items", []):
        where = f"line {item['line']}: " if item.get("line") else ""
        lines.append(f"  [{item['kind']}] {where}{item['message']}")
    return "\n".join(lines)


def _spec_text(spec: list[Any] | None) -> str:
    if spec is None:
        return "(not a NamedSharding)"
    entries = [
        "None" if e is None else repr(e) if isinstance(e, str) else repr(tuple(e)) for e in spec
    ]
    return f"P({', '.join(entries)})"


def _sharding(event: dict[str, Any]) -> str:
    """Each array's blocks as a device map (rows and columns of its first two
    dimensions: the device ids holding each block), then the collectives."""
    lines = [f"── sharding{_pipeline_tag(event)}: {event.get('devices')} devices ──"]
    for side in ("arguments", "outputs"):
        for array in event.get(side, []):
            shape = f"{array['dtype']}[{','.join(map(str, array['shape']))}]"
            name = f"{side[:-1]} {array['path'] or '(whole)'}"
            lines.append(f"  {name}: {shape} {_spec_text(array.get('spec'))}")
            rows: dict[int, list[str]] = {}
            for block in array["grid"]:
                row = block["start"][0] if block["start"] else 0
                rows.setdefault(row, []).append(",".join(map(str, block["devices"])))
            for row in sorted(rows):
                lines.append("    " + " | ".join(f"{cell:^9}" for cell in rows[row]))
    collectives = event.get("collectives", [])
    lines.append(f"  collectives: {len(collectives) or 'none'}")
    for c in collectives:
        where = f"line {c['line']}" if c.get("line") else "(added by the partitioner)"
        groups = c.get("replica_groups")
        lines.append(
            f"    {c['kind']:<18} {c['bytes']:>10,} B  {c['shape']:<20} groups {groups}  {where}"
        )
        if (origin := c.get("origin")) and origin.get("written"):
            lines.append("      the code's own collective: no sharding forced it")
        elif origin:
            lines.append(f"      from {_origins(origin['from'])} -> to {_origins(origin['to'])}")
    if event.get("origins_note"):
        lines.append(f"  origins not reported: {event['origins_note']}")
    for r in event.get("rematerializations", []):
        where = f"line {r['line']}" if r.get("line") else "(no line)"
        lines.append(
            f"  involuntary full rematerialization at {where} ({r['op_name']}): "
            f"from {r['from_sharding']} to {r['to_sharding']}"
        )
    return "\n".join(lines)


def _origins(origins: list[dict[str, Any]]) -> str:
    """One side of a collective's origin: ``argument a P('x', None) (line 2)``."""
    if not origins:
        return "-"
    return "; ".join(
        f"{o['kind']} {o['name']} {o.get('sharding', '')}"
        + (f" (line {o['line']})" if o.get("line") else "")
        for o in origins
    )


def _shapes(event: dict[str, Any]) -> str:
    """Each expression's span and shape, as ``line:col-end_col  f32[4,2]`` (columns from 1)."""
    spans = event.get("spans", [])
    left_out = event.get("spans_left_out") or 0
    count = f"{len(spans)} of {len(spans) + left_out}" if left_out else str(len(spans))
    lines = [f"── shapes{_pipeline_tag(event)}: {count} expressions ({event.get('source')}) ──"]
    for s in spans:
        end = f"{s['end_line']}:{s['end_col']}" if s["end_line"] != s["line"] else str(s["end_col"])
        where = f"{s['line']}:{s['col'] + 1}-{end}"
        shape = f"{s['dtype']}[{','.join(map(str, s['shape']))}]"
        if s.get("batched_shape") is not None:
            dims = s.get("batch_dims")
            shape += f"  batched [{','.join(map(str, s['batched_shape']))}]"
            shape += f" (batch dims {dims})" if dims is not None else ""
        sharding = f"  {s['sharding']}" if s.get("sharding") else ""
        lines.append(f"  {where:<14} {shape}{sharding}  {s.get('primitive', '')}")
    return "\n".join(lines + _notes(event))


def _rate(value: Any, unit: str) -> str:
    return "-" if value is None else f"{value / 1e9:.2f} G{unit}/s"


def _profile(event: dict[str, Any]) -> str:
    """Per executed HLO instruction: calls, time, its HLO and source lines, roofline."""
    rows, peaks = event.get("rows", []), event.get("peaks")
    total = sum(r["total_us"] for r in rows)
    lines = [
        f"── profile{_pipeline_tag(event)}: {event['calls']} calls, {event['wall_us']:.1f} µs wall,"
        f" {total:.1f} µs in {len(rows)} instructions ──",
        f"  {'instruction':32} {'calls':>6} {'total µs':>10} {'hlo':>5} {'line':>5}"
        f" {'FLOP/s':>12} {'bytes/s':>12}  bound",
    ]
    for r in rows:
        lines.append(
            f"  {r['name'][:32]:32} {r['calls']:>6} {r['total_us']:>10.1f} {r['hlo_line']:>5}"
            f" {r.get('line') or '-':>5} {_rate(r.get('flops_per_s'), 'FLOP'):>12}"
            f" {_rate(r.get('bytes_per_s'), 'B'):>12}  {r.get('bound') or '-'}"
        )
    if peaks:
        lines.append(
            f"  peaks ({peaks['device_kind']}): {_rate(peaks['flops_per_s'], 'FLOP')},"
            f" {_rate(peaks['bytes_per_s'], 'B')} — {peaks['source']}"
        )
    passes = event.get("passes") or []
    if passes:
        slowest = sorted(passes, key=lambda p: -p["total_us"])[:10]
        lines.append(
            f"  compile: {len(passes)} HLO passes, {sum(p['total_us'] for p in passes):.0f} µs; slowest:"
        )
        lines += [f"    {p['pipeline']} / {p['pass']}: {p['total_us']:.0f} µs" for p in slowest]
    return "\n".join(lines + _notes(event))


#: How the CLI shows each output (sandbox.protocol.OUTPUT_TABLE names them all;
#: tests/protocol/test_outputs_registry.py checks this table does too).
RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "jaxpr": _ir_text,
    "stablehlo": _ir_text,
    "hlo": _ir_text,
    "value": _value,
    "cost": _cost,
    "timing": _timing,
    "passes": _passes,
    "asm": _asm,
    "memory": _memory,
    "remarks": _remarks,
    "sharding": _sharding,
    "autodiff": autodiff_text,
    "shapes": _shapes,
    "profile": _profile,
    "kernels": kernels_text,
    "checks": checks_text,
    "trace_values": trace_values_text,
    "recompiles": recompiles_text,
    "export": export_text,
    "numerics": numerics_text,
}


def render_event(event: dict[str, Any]) -> str | None:
    kind = event.get("type")
    tag = _pipeline_tag(event)
    if kind == "accepted":
        w = event.get("worker", {})
        return f"# worker: {w.get('platform')} ({w.get('device_kind')}) × {w.get('devices')}, jax {w.get('jax_version')}"
    if kind in ("stdout", "stderr"):
        stage = event.get("stage")
        prefix = f"[{kind} at {stage}] " if stage else f"[{kind}] "
        return "".join(
            prefix + line for line in str(event.get("text", "")).splitlines(True)
        ).rstrip("\n")
    if kind == "stage":
        return f"# {event['stage']}{tag}: {event['ms']:.1f} ms"
    if kind == "text_part":  # the next part of the IR text shown last (in order)
        return str(event["text"]).removesuffix("\n")
    if kind in RENDERERS:
        return RENDERERS[kind](event)
    if kind == "error":
        where = f" at line {event['line']}" if event.get("line") else ""
        text = f"error{tag} in {event.get('stage')}{where}: {event.get('kind')}: {event.get('message')}"
        if event.get("hint"):
            text += f"\n  hint: {event['hint']}"
        if event.get("doc_url"):
            text += f"\n  see: {event['doc_url']}"
        return text
    if kind == "done":
        reason = f" ({event['reason']})" if event.get("reason") else ""
        text = f"# done: {event['status']}{reason} in {event['ms']:.0f} ms"
        if event["status"] == "timeout" and LONGEST not in event.get("reason", ""):
            # the reason names the REST field; here the same is the run's --timeout
            text += "\n  hint: run it again with --timeout SECONDS for more time"
        return text
    return None
