"""What an MCP tool answers, made from the REST API's answer: text for the model and the
same facts as structured content, every output cut at ``mcp_output_chars`` with its
total and a ``truncated`` flag (an HLO can be megabytes; an agent's context is not)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from sandbox.protocol.text_parts import join_parts

#: events that say how a run went, not what it made (folded into the answer's head)
_CONTROL = frozenset({"accepted", "stage", "done"})
#: events a run sends many of, one per line: joined into one output per pipeline
_STREAMS = frozenset({"stdout", "stderr"})


def capped(text: str, limit: int) -> dict[str, Any]:
    """``text`` cut at ``limit`` characters, with its total and whether it was cut."""
    return {"text": text[:limit], "chars": len(text), "truncated": len(text) > limit}


def _body(event: dict[str, Any]) -> str:
    """An output event's content as text: its ``text`` where it has one (jaxpr, HLO...),
    a value's ``repr`` (as Python prints it), else its fields as compact JSON (cost,
    memory...)."""
    text = event.get("text") if event["type"] != "error" else None
    text = event.get("repr") if text is None and event["type"] == "value" else text
    if isinstance(text, str):
        return text
    rest = {k: v for k, v in event.items() if k not in ("type", "pipeline", "seq")}
    return json.dumps(rest, ensure_ascii=False, separators=(",", ":"))


def run_outputs(events: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    """A run's events as one answer: status, worker, then each output capped."""
    outputs: list[dict[str, Any]] = []
    streams: dict[tuple[str, str], list[str]] = {}
    done: dict[str, Any] = {}
    worker: dict[str, Any] | None = None
    for event in join_parts(events):  # a long text's size and head are the whole text's
        kind = event.get("type", "")
        if kind == "done":
            done = event
        elif kind == "accepted" and worker is None:
            worker = event.get("worker")
        elif kind in _STREAMS:
            streams.setdefault((kind, str(event.get("pipeline", "a"))), []).append(
                str(event.get("text", ""))
            )
        elif kind not in _CONTROL:
            outputs.append(
                {
                    "type": kind,
                    "pipeline": event.get("pipeline", "a"),
                    **capped(_body(event), limit),
                }
            )
    for (kind, pipeline), parts in streams.items():
        outputs.append({"type": kind, "pipeline": pipeline, **capped("".join(parts), limit)})
    return {
        "status": done.get("status", "error"),
        "reason": done.get("reason", ""),
        "ms": done.get("ms"),
        "cached": bool(done.get("cached", False)),
        "worker": worker,
        "outputs": outputs,
    }


def run_text(answer: dict[str, Any]) -> str:
    head = f"status: {answer['status']}"
    if answer.get("reason"):
        head += f" ({answer['reason']})"
    if answer.get("ms") is not None:
        head += f", {answer['ms']:.0f} ms"
    if answer.get("cached"):
        head += ", answered from the cache"
    worker = answer.get("worker") or {}
    if worker.get("jax_version"):
        head += f"; JAX {worker['jax_version']} on {worker.get('backend', '?')}"
    parts = [head]
    for out in answer["outputs"]:
        title = f"## {out['type']} (pipeline {out['pipeline']})"
        if out["truncated"]:
            title += f" [truncated: first {len(out['text'])} of {out['chars']} characters]"
        parts.append(f"{title}\n{out['text']}")
    return "\n\n".join(parts)


def across_outputs(answer: dict[str, Any], limit: int) -> dict[str, Any]:
    """POST /api/v1/across's answer with each diff capped."""
    outputs = []
    for change in answer.get("outputs", []):
        steps = [
            {"from": step["from"], "to": step["to"], "diff": capped(step.get("diff", ""), limit)}
            for step in change.get("changes", [])
        ]
        outputs.append({**change, "changes": steps})
    return {**answer, "outputs": outputs}


def across_text(answer: dict[str, Any]) -> str:
    lines = []
    for v in answer.get("versions", []):
        line = f"JAX {v['version']}: {v['status']}"
        if v.get("errors"):
            line += " — " + "; ".join(f"{p}: {e}" for p, e in v["errors"].items())
        lines.append(line)
    for change in answer.get("outputs", []):
        first = change.get("first_changed")
        what = f"first changed in {first}" if first else "the same on every version"
        lines.append(f"## {change['output']} (pipeline {change['pipeline']}): {what}")
        for step in change.get("changes", []):
            diff = step["diff"]
            note = " [truncated]" if diff["truncated"] else ""
            lines.append(f"### {step['from']} → {step['to']}{note}\n{diff['text']}")
    return "\n".join(lines)


def error_of(response: httpx.Response) -> tuple[str, dict[str, Any]]:
    """A REST error answer as a tool error: its words, and its body (with
    ``retry_after_s`` from the body or the ``Retry-After`` header for 429/503)."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    body.setdefault("status", response.status_code)
    body.setdefault("error", "http_error")
    body.setdefault("message", response.text[:500])
    retry = response.headers.get("retry-after")
    if body.get("retry_after_s") is None and retry is not None:
        try:
            body["retry_after_s"] = float(retry)
        except ValueError:
            pass
    text = f"HTTP {body['status']} {body['error']}: {body['message']}"
    if body.get("retry_after_s") is not None:
        text += f" (retry after {body['retry_after_s']:g} s)"
    return text, body
