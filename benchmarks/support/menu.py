"""The page's examples (examples/menu.json) as the requests the page sends.

One reading of the menu for the benchmarks that run the examples: each entry's code
file, its args, its steps as the request's transforms (options as the step editor
sends them), its compare pipeline, its outputs and the other request fields the page
sets from the entry. The mesh builder's fields (``sharding``) are the page's to turn
into a request (frontend/src/model/sharding-studio.ts): an entry with them is left out.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def option(typed: Any) -> Any:
    """A step option as the page's step editor sends it (frontend/src/model/transforms.ts):
    what was typed, read as a Python literal where it is one ("(None, 0, 0)", "1"),
    else the name as typed (a checkpoint policy)."""
    if not isinstance(typed, str):
        return typed
    try:
        value = ast.literal_eval(typed)
    except (ValueError, SyntaxError):
        return typed
    return json.loads(json.dumps(value))  # tuples as lists


def transforms(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"name": s["name"], **{k: option(v) for k, v in s.get("options", {}).items()}}
        for s in steps
    ]


def menu_requests() -> dict[str, dict[str, Any]]:
    """Each example's request by its id, in the menu's order: code, args, transforms,
    and where the entry sets them ``entry``, ``compare``, ``outputs``, ``devices``,
    ``pallas_interpret``, ``export_shapes``, ``export_platforms``. Entries with a
    mesh (``sharding``) are left out."""
    menu = json.loads((EXAMPLES / "menu.json").read_text())
    requests = {}
    for entry in menu["examples"]:
        if entry.get("sharding"):
            continue
        request: dict[str, Any] = {
            "code": (EXAMPLES / entry["file"]).read_text(),
            "args": entry["args"],
            "transforms": transforms(entry.get("steps", [])),
        }
        if "entry" in entry:
            request["entry"] = entry["entry"]
        if entry.get("compare"):
            request["compare"] = [transforms(entry["compare"])]
        if entry.get("outputs"):
            request["outputs"] = list(entry["outputs"])
        if entry.get("devices"):
            request["devices"] = entry["devices"]
        if entry.get("pallasInterpret"):
            request["pallas_interpret"] = entry["pallasInterpret"]
        # the export fields as frontend/src/model/export_fields.ts reads the typed text
        if (shapes := entry.get("exportShapes", "")).strip():
            request["export_shapes"] = [s.strip() or None for s in shapes.split(";")]
        if platforms := [
            p.strip() for p in entry.get("exportPlatforms", "").split(",") if p.strip()
        ]:
            request["export_platforms"] = platforms
        requests[entry["id"]] = request
    return requests


def one_device(request: dict[str, Any]) -> bool:
    """Whether an example's request runs on one device (no ``devices``, no ``pmap``)."""
    return request.get("devices", 1) == 1 and all(
        t["name"] != "pmap" for t in request["transforms"]
    )
