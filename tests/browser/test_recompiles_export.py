"""The Recompiles and Export panes (issue 36) in a real browser, from their examples on
the menu: the editor marks each call site's line with its compiles and hits, the pane
lists JAX's own explanations; the export's avals, platforms and round trip. What the
page shows is checked against JAX called directly in a fresh process
(tests/engine/understand_reference.py), never against our own events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.engine.test_recompiles import reference

from .test_page import set_code, show_tab, wait_done

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOOP_LINE, SIN_LINE, ENTRY_LINE, STEP_BODY = 20, 23, 28, 15
IF_LINE = 15  # examples/export_symbolic.py's `if x.shape[0] > 2:`


def _marks(page: Any) -> dict[int, str]:
    """The editor's recompile marks: line → the summary at its end."""
    marks: dict[int, str] = {}
    for line in page.locator(".cm-recompile-line").all():
        number = int(str(line.get_attribute("data-recompile-line")))
        marks[number] = line.locator("[data-testid=recompile-mark]").inner_text()
    return marks


def test_recompiles_marks_the_call_sites_and_lists_jaxs_explanations(page: Any) -> None:
    code = (EXAMPLES / "recompiles.py").read_text()
    jax_says = reference("recompiles", {"code": code, "args": "(jnp.ones(4),)", "entry": "f"})
    page.select_option("#examples", "recompiles")
    assert wait_done(page, 180_000) == "ok", page.inner_text("#panel-errors")
    page.wait_for_selector(".cm-recompile-line", timeout=30_000)
    marks = _marks(page)
    # three calls of `fast` on f32[3], f32[4], f32[4]: two compiles, one hit
    assert marks[LOOP_LINE] == "2 compiles, 1 hit — x: f32[3] → f32[4]", marks
    assert marks[SIN_LINE] == "1 compile, 0 hits — JAX gave no explanation", marks
    # the entry's calls: f32[4] again, compiled at the loop already
    assert marks[ENTRY_LINE] == "0 compiles, 2 hits", marks
    assert STEP_BODY not in marks, marks  # jnp.tanh inside the traced step: inlined, no call

    show_tab(page, "recompiles")
    page.wait_for_selector("#panel-recompiles .recompile-site", timeout=30_000)
    shown = page.locator("#panel-recompiles .recompile-explanation").all_inner_texts()
    # every explanation JAX logged for the jitted calls is shown, word for word
    for explanation in jax_says["explanations"]:
        if "defined at snippet.py" in explanation:
            assert explanation.strip() in [s.strip() for s in shown], (explanation, shown)
    sin = page.locator(
        f"#panel-recompiles .recompile-site[data-line='{SIN_LINE}'][data-function=sin]"
    )
    assert "target is itself jitted" in sin.inner_text()
    # a click on a site's line selects it in the editor
    page.locator(
        f"#panel-recompiles .recompile-site[data-line='{LOOP_LINE}'][data-function=step] [data-testid=recompile-line]"
    ).click()
    active = page.inner_text(".cm-editor:has([data-testid=code]) .cm-activeLineGutter").strip()
    assert active == str(LOOP_LINE)


def test_export_shows_jaxs_avals_and_a_working_round_trip(page: Any) -> None:
    code = (EXAMPLES / "export_symbolic.py").read_text()
    jax_says = reference(
        "export",
        {"code": code, "args": "(jnp.ones((4, 3)),)", "entry": "f", "shapes": ["b, 3"],
         "platforms": ["cpu", "cuda", "tpu"]},
    )  # fmt: skip
    page.select_option("#examples", "export-symbolic")
    assert wait_done(page, 180_000) == "ok", page.inner_text("#panel-errors")
    show_tab(page, "export")
    page.wait_for_selector("#panel-export [data-testid=export-in-avals]", timeout=30_000)
    assert page.inner_text("#panel-export [data-testid=export-in-avals]") == ", ".join(
        jax_says["in_avals"]
    )
    assert page.inner_text("#panel-export [data-testid=export-out-avals]") == ", ".join(
        jax_says["out_avals"]
    )
    assert page.inner_text("#panel-export [data-testid=export-platforms]") == "cpu, cuda, tpu"
    convention = page.inner_text("#panel-export [data-testid=export-calling-convention]")
    assert convention == str(jax_says["calling_convention_version"])
    trips = page.locator("#panel-export [data-testid=export-roundtrip]")
    assert trips.count() == 2
    assert [t.get_attribute("data-equal") for t in trips.all()] == ["true", "true"]
    assert "float32[5,3]" in trips.nth(1).inner_text()
    assert page.locator("#panel-export [data-testid=export-download]").count() == 1


def test_a_symbolic_shape_error_is_marked_at_its_line(page: Any) -> None:
    page.select_option("#examples", "export-symbolic")
    assert wait_done(page, 180_000) == "ok", page.inner_text("#panel-errors")
    # uncomment the example's `if`: JAX cannot decide `b > 2` for every b
    code = (EXAMPLES / "export_symbolic.py").read_text()
    code = code.replace("    # if x.shape[0] > 2:", "    if x.shape[0] > 2:")
    code = code.replace("    #     x = x * 2", "        x = x * 2")
    set_code(page, code)
    page.keyboard.press("Control+Enter")
    assert wait_done(page, 180_000) == "error"
    marked = page.locator("[data-testid=code] .cm-error-line")
    assert marked.get_attribute("data-error-line") == str(IF_LINE)
    card = page.locator(".error-card[data-kind=InconclusiveDimensionOperation]")
    assert "Symbolic dimension comparison 'b' > '2' is inconclusive" in card.inner_text()
