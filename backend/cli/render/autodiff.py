"""The CLI's text for an ``autodiff`` event (``jaxplay run --output autodiff``): each
stage's jaxpr under its path, each path's residuals, the checkpoint policies."""

from __future__ import annotations

from typing import Any


def _bytes(value: Any) -> str:
    return "-" if value is None else f"{value:,} B"


def _flops(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f}"


def autodiff_text(event: dict[str, Any]) -> str:
    pipeline = event.get("pipeline", "main")
    tag = "" if pipeline == "main" else f" [compare {pipeline}]"
    transform = event.get("transform")
    head = f"── autodiff{tag}"
    if transform:
        wrt = ", ".join(event.get("wrt") or [])
        head += f": {transform} of {event.get('function')} with respect to {wrt}"
    lines = [head + " ──"]
    for path in event.get("paths") or []:
        default = " (JAX's default)" if path.get("default") else ""
        status = "" if path["status"] == "ok" else f" {path['status']}"
        note = f": {path['note']}" if path.get("note") else ""
        lines.append(f"  path {path['path']}{default}{status}{note}")
        if path["status"] != "ok":
            continue
        rows = path.get("residuals") or []
        lines.append(f"    {len(rows)} residuals, {_bytes(path.get('residual_bytes'))}")
        for r in rows:
            shape = f"{r['dtype']}[{','.join(map(str, r['shape']))}]"
            at = f"line {r['line']}" if r.get("line") else "-"
            lines.append(
                f"    {r.get('name') or '?':>6}  {shape:<20} {_bytes(r['bytes']):>12}  {r['source']:<16} {at}"
            )
    for stage in event.get("stages") or []:
        lines.append(f"── {stage['path']} · {stage['stage']}: {stage['title']} ──")
        lines.append(stage["text"].rstrip())
    policies = event.get("policies") or []
    if policies:
        lines.append("── checkpoint policies ──")
        lines.append(
            f"  {'policy':36} {'residuals':>9} {'bytes':>14} {'backward':>12} {'recomputed':>12}"
        )
        for p in policies:
            mark = " *" if p.get("current") else ""
            lines.append(
                f"  {p['policy'] + mark:36} {p['residuals']:>9} {_bytes(p['residual_bytes']):>14}"
                f" {_flops(p.get('flops_backward')):>12} {_flops(p.get('flops_recomputed')):>12}"
                + (f"  {p['note']}" if p.get("note") else "")
            )
        if event.get("flops_source"):
            lines.append(f"  FLOPs: {event['flops_source']}")
    lines += [f"  note: {n}" for n in event.get("notes") or []]
    return "\n".join(lines)
