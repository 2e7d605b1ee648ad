"""Readable text for a stream of events (``jaxplay run`` without ``--json``)."""

from __future__ import annotations

from typing import Any

HEADINGS = {"jaxpr": "jaxpr", "stablehlo": "StableHLO", "hlo": "HLO (optimised)"}


def _pipeline_tag(event: dict[str, Any]) -> str:
    pipeline = event.get("pipeline", "main")
    return "" if pipeline == "main" else f" [compare {pipeline}]"


def _fmt_ms(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _fmt_bytes(value: Any) -> str:
    return "-" if value is None else f"{value:,} B"


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
    if kind in HEADINGS:
        return f"── {HEADINGS[kind]}{tag} ──\n{event['text'].rstrip()}"
    if kind == "value":
        lines = [f"── value{tag} ──", event["repr"]]
        for leaf in event.get("tree", []):
            lines.append(
                f"  {leaf['path'] or '(root)'}: {leaf['dtype']}{leaf['shape']} sha256={leaf['sha256'][:16]}…"
            )
        return "\n".join(lines)
    if kind == "cost":
        mem = event.get("memory") or {}
        return (
            f"── cost{tag} ──\n  flops {event.get('flops')}  transcendentals {event.get('transcendentals')}"
            f"  bytes accessed {event.get('bytes_accessed')}\n  memory: arguments {_fmt_bytes(mem.get('argument'))}"
            f", output {_fmt_bytes(mem.get('output'))}, temp {_fmt_bytes(mem.get('temp'))}"
        )
    if kind == "timing":
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
        return f"# done: {event['status']}{reason} in {event['ms']:.0f} ms"
    return None
