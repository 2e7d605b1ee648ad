"""The outputs table: every layer's table names every output of OUTPUT_TABLE, once,
and what each layer derives from it (stages, cache, defaults) follows it."""

from __future__ import annotations

import re
from pathlib import Path

from backend.app.trust.cache import CACHED_TYPES
from backend.cli.render.events import RENDERERS
from sandbox.engine.core import registry
from sandbox.protocol.events import EVENT_MODELS
from sandbox.protocol.output_table import DEFAULT_OUTPUTS, OUTPUT_TABLE
from sandbox.protocol.requests import RunRequest
from sandbox.protocol.vocabulary import OUTPUTS
from sandbox.supervisor.event_gate import allowed_stages

ROOT = Path(__file__).resolve().parents[2]


def test_every_layer_names_every_output_in_order() -> None:
    assert tuple(OUTPUT_TABLE) == OUTPUTS
    assert [name for name, _ in registry.rows(OUTPUTS)] == list(OUTPUTS), "sandbox/engine/outputs/"
    assert set(RENDERERS) == set(OUTPUTS), "backend/cli/render/events.py"
    for name in OUTPUTS:
        assert EVENT_MODELS[name] is OUTPUT_TABLE[name].event


def test_page_has_a_pane_entry_per_output() -> None:
    text = (ROOT / "frontend/src/model/registry.ts").read_text()
    block = text[text.index("export const OUTPUT_PANES") :]
    block = block[: block.index("\n};")]
    assert sorted(re.findall(r"^  (\w+): \{", block, re.M)) == sorted(OUTPUTS)


def test_run_level_outputs_are_made_by_the_run() -> None:
    for name, spec in OUTPUT_TABLE.items():
        output = registry.row(name)
        assert (output.make is None) == (not spec.per_pipeline), name
        assert output.make is not None or output.hooks is not None, name


def test_defaults_and_cache_follow_the_table() -> None:
    assert RunRequest.model_validate({"code": ""}).outputs == list(DEFAULT_OUTPUTS)
    assert "passes" not in DEFAULT_OUTPUTS and "timing" in DEFAULT_OUTPUTS
    assert "timing" not in CACHED_TYPES and {"passes", "asm", "memory"} <= CACHED_TYPES


def test_stages_follow_the_table() -> None:
    only = allowed_stages(RunRequest.model_validate({"code": "", "outputs": ["passes"]}))
    assert only == {"exec", "args", "lower", "compile"}
    assert allowed_stages(RunRequest.model_validate({"code": "", "outputs": ["remarks"]})) == {
        "exec",
        "args",
    }
