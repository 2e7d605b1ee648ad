"""The ``trace_values`` output as text (``jaxplay run --output trace_values``): where
the first NaN and Inf were made, then one line per equation stepped (its first
output's figures; ``!`` where its outputs hold a NaN or an Inf)."""

from __future__ import annotations

from typing import Any


def _figure(value: Any) -> str:
    return "-" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def _at(rows: list[dict[str, Any]], n: int | None, what: str) -> str | None:
    if n is None:
        return None
    row = rows[n]
    where = f" at line {row['line']}" if row.get("line") else ""
    fed = [str(i) for i in row.get("inputs", []) if i is not None]
    fed_by = f", fed by row{'s' if len(fed) > 1 else ''} {', '.join(fed)}" if fed else ""
    return f"  first {what}: row {n}, {row['primitive']} (eqn {row['eqn']}){where}{fed_by}"


def _bad(row: dict[str, Any]) -> bool:
    return any(o.get("nan_count") or o.get("inf_count") for o in row.get("outputs", []))


def trace_values_text(event: dict[str, Any]) -> str:
    pipeline = event.get("pipeline", "main")
    tag = "" if pipeline == "main" else f" [compare {pipeline}]"
    rows = event.get("rows", [])
    lines = [
        f"── trace_values{tag}: {len(rows)} rows, {event.get('evaluated_steps')} equations evaluated ──"
    ]
    found = [
        _at(rows, event.get("first_nan"), "NaN"),
        _at(rows, event.get("first_inf"), "Inf"),
    ]
    lines += [line for line in found if line] or ["  no NaN or Inf"]
    lines.append(
        f"  {'row':>5}  {'eqn':<12} {'primitive':<20} {'line':>5} {'phase':<8} {'iter':>6}"
        f"  {'output':<16} {'min':>12} {'max':>12} {'mean':>12} {'nan':>5} {'inf':>5}"
    )
    for n, row in enumerate(rows):
        out = row["outputs"][0] if row.get("outputs") else {}
        shape = f"{out.get('dtype', '')}[{','.join(map(str, out.get('shape', [])))}]" if out else ""
        if row.get("iterations"):
            iteration = f"×{row['iterations']}"
        else:
            iteration = "" if row.get("iteration") is None else str(row["iteration"])
        mark = "!" if _bad(row) else " "
        lines.append(
            f"{mark} {n:>5}  {row['eqn'][:12]:<12} {'  ' * min(row.get('depth', 0), 4)}"
            f"{row['primitive'][:20]:<20} {row.get('line') or '-':>5} {row.get('phase') or '-':<8}"
            f" {iteration:>6}  {shape[:16]:<16} {_figure(out.get('min')):>12}"
            f" {_figure(out.get('max')):>12} {_figure(out.get('mean')):>12}"
            f" {_figure(out.get('nan_count')):>5} {_figure(out.get('inf_count')):>5}"
        )
    if event.get("cut"):
        lines.append(f"  cut ({event['cut']}): stepping stopped early")
    lines += [f"  note: {note}" for note in event.get("notes") or []]
    return "\n".join(lines)
