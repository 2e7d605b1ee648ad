"""The CLI's text of the ``recompiles`` and ``export`` outputs (backend/cli/render/events.py's
RENDERERS names them)."""

from __future__ import annotations

from typing import Any


def _tag(event: dict[str, Any]) -> str:
    pipeline = event.get("pipeline", "main")
    return "" if pipeline == "main" else f" [compare {pipeline}]"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def recompiles_text(event: dict[str, Any]) -> str:
    sites = event.get("sites", [])
    lines = [f"── recompiles: {len(sites)} call site{'s' if len(sites) != 1 else ''} ──"]
    for site in sites:
        lines.append(
            f"  line {site['line']} {site['function']} ({site['caller']}): {site['summary']}"
            f"  [trace {_ms(site['trace_ms'])}, lower {_ms(site['lower_ms'])}, "
            f"compile {_ms(site['compile_ms'])}]"
        )
        for miss in site.get("misses", []):
            lines.append(
                f"    miss: {miss['reason']}  (trace {_ms(miss['trace_ms'])}, "
                f"lower {_ms(miss['lower_ms'])}, compile {_ms(miss['compile_ms'])})"
            )
        if site.get("silent"):
            lines.append(f"    note: {site['silent']}")
    lines += [f"  note: {n}" for n in event.get("notes", [])]
    return "\n".join(lines)


def export_text(event: dict[str, Any]) -> str:
    lines = [
        f"── export{_tag(event)}: {event['function']} for {', '.join(event['platforms'])}, "
        f"calling convention {event['calling_convention_version']} ──",
        f"  in:  {', '.join(event['in_avals'])}",
        f"  out: {', '.join(event['out_avals'])}",
    ]
    if event.get("artifact_bytes") is not None:
        lines.append(f"  artifact: {event['artifact_bytes']:,} bytes")
    for call in event.get("roundtrip", []):
        if call.get("error"):
            lines.append(
                f"  round trip ({call['source']}): {', '.join(call['inputs'])} → {call['error']}"
            )
        else:
            verdict = "equal" if call["equal"] else f"differs (max |Δ| {call['max_abs_diff']})"
            lines.append(
                f"  round trip ({call['source']}): {', '.join(call['inputs'])} → "
                f"{', '.join(call['outputs'])}, {verdict}"
            )
    lines += [f"  note: {n}" for n in event.get("notes", [])]
    return "\n".join(lines)
