"""The page's catalogue of its own words (frontend/src/i18n/en.json) holds the engine's
hints of the sharp-bit errors word for word (sandbox/engine/core/errors.py HINTS), so
that the page can show each in the reader's language (i18n/index.ts ``localHint``
matches the hint that came by its English text): a hint reworded in the engine and
not in the catalogue would silently stay English. (That zh.json has every key of
en.json is frontend/test/i18n.test.ts.)"""

from __future__ import annotations

import json
from pathlib import Path

from sandbox.engine.core.errors import HINTS

I18N = Path(__file__).resolve().parents[2] / "frontend" / "src" / "i18n"

#: the sharp bits: the errors a JAX learner meets first (the tour's second step is one)
SHARP_BITS = {
    "TracerBoolConversionError",
    "ConcretizationTypeError",
    "TracerIntegerConversionError",
    "TracerArrayConversionError",
    "NonConcreteBooleanIndexError",
    "UnexpectedTracerError",
    "KeyReuseError",
}


def test_every_translated_hint_is_one_the_engine_sends() -> None:
    en = json.loads((I18N / "en.json").read_text())
    engine = {h.hint for h in HINTS}
    for key, text in en.items():
        if key.startswith("hint."):
            assert text in engine, f"{key} is not the engine's hint: {text!r}"


def test_every_sharp_bit_hint_is_translated() -> None:
    en = json.loads((I18N / "en.json").read_text())
    zh = json.loads((I18N / "zh.json").read_text())
    ours = {text for key, text in en.items() if key.startswith("hint.")}
    for hint in HINTS:
        if hint.kind in SHARP_BITS:
            assert hint.hint in ours, f"the {hint.kind} hint is not in the page's catalogue"
    assert {k for k in en if k.startswith("hint.")} == {k for k in zh if k.startswith("hint.")}
