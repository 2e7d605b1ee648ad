"""Docs that are tested: docs/api.md and docs/settings.md against the code."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from backend.app.core.settings import Settings
from backend.app.core.settings_table import settings_table
from sandbox.protocol import EVENT_FIELDS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _table_after(text: str, heading: str) -> list[list[str]]:
    section = text.split(heading, 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("#"):
            break
        if line.startswith("|") and not line.startswith("| ---"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[1:]  # less the header


def test_the_events_table_matches_the_protocol() -> None:
    rows = _table_after((DOCS / "api.md").read_text(), "## The events")
    documented = {re.sub(r"`", "", row[0]): set(re.findall(r"`([a-z_]+)`", row[1])) for row in rows}
    assert documented == {kind: set(fields) for kind, fields in EVENT_FIELDS.items()}


def test_the_settings_table_is_the_code_s() -> None:
    text = (DOCS / "settings.md").read_text()
    assert settings_table() in text, "run `python scripts/gen_settings_doc.py`"
    for name in Settings.model_fields:
        assert Settings.model_fields[name].description, f"setting {name} has no description"


def test_every_endpoint_is_documented(client: TestClient) -> None:
    api = (DOCS / "api.md").read_text()
    paths = set(client.get("/openapi.json").json()["paths"])
    for path in paths | {"/api/v1/ws", "/docs", "/openapi.json"}:
        spelled = path.replace("{snippet_id}", "{id}")
        assert f"`GET {spelled}`" in api or f"`POST {spelled}`" in api or f"{spelled}`" in api, path


def test_the_envelope_types_are_documented() -> None:
    api = (DOCS / "api.md").read_text().split("## The WebSocket", 1)[1]
    for kind in ("hello", "event", "error", "run", "cancel"):
        assert f"| `{kind}` |" in api, kind
