"""The ``checks`` output as text (``jaxplay run --check nans ...``): one line per
result, its status first, then where and JAX's words."""

from __future__ import annotations

from typing import Any

MARKS = {"ok": "ok     ", "failed": "FAILED ", "error": "error  ", "skipped": "skipped"}


def _figure(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def checks_text(event: dict[str, Any]) -> str:
    pipeline = event.get("pipeline", "main")
    tag = "" if pipeline == "main" else f" [compare {pipeline}]"
    lines = [f"── checks{tag} ──"]
    for r in event.get("results", []):
        name = r["name"]
        if r.get("order") is not None:
            name += f" (order {r['order']}, {r.get('mode')})"
        where = f" at line {r['line']}" if r.get("line") else ""
        head, *rest = str(r.get("message", "")).splitlines() or [""]
        lines.append(f"  {MARKS.get(r['status'], r['status'])} {name}{where}: {head}")
        if r.get("max_abs_error") is not None or r.get("max_rel_error") is not None:
            lines.append(
                f"      max absolute error {_figure(r.get('max_abs_error'))}, "
                f"max relative error {_figure(r.get('max_rel_error'))}"
            )
        lines += [f"      {line}" for line in rest]
        if r.get("hint"):
            lines.append(f"      hint: {r['hint']}")
    return "\n".join(lines)
