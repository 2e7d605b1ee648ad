"""The Autodiff, Stepper and Checks panes (issue 23) in a real browser, on the classic
NaN gradient: ``jnp.where(x > 0, jnp.sqrt(x), 0.)`` differentiated at 0. What the page
shows is checked against JAX called directly in this process (its saved residuals,
its JVP jaxpr, its ``jax_debug_nans`` error), not against our own events."""

from __future__ import annotations

import contextlib
import io
import re
import traceback
from typing import Any

from .test_page import add_step, clear_pipeline, set_code, show_tab, wait_done

CODE = "import jax.numpy as jnp\n\ndef f(x):\n    y = jnp.sqrt(x)\n    return jnp.where(x > 0, y, 0.0)\n"
SQRT_LINE = 4


def _jax_says() -> dict[str, Any]:
    """JAX on the same code (compiled as the page's snippet.py): the residuals the
    backward pass saves (primitive, line), the JVP jaxpr's primitives, and the NaN
    check's message and line."""
    import jax
    import jax.ad_checkpoint

    namespace: dict[str, Any] = {}
    exec(compile(CODE, "snippet.py", "exec"), namespace)
    f = namespace["f"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        jax.ad_checkpoint.print_saved_residuals(f, 0.0)
    residuals = {
        (m.group(1), int(m.group(2)))
        for m in re.finditer(r"output of (\w+) from snippet\.py:(\d+)", printed.getvalue())
    }
    jvp = jax.make_jaxpr(lambda x, t: jax.jvp(f, (x,), (t,)))(0.0, 1.0)
    nan_message, nan_line = _nan_error(f)
    return {
        "residuals": residuals,
        "jvp_primitives": {e.primitive.name for e in jvp.jaxpr.eqns},
        "nan_message": nan_message,
        "nan_line": nan_line,
    }


def _nan_error(f: Any) -> tuple[str, int | None]:
    """JAX's error for grad(f)(0.0) under jax_debug_nans, and its innermost snippet line
    (from the traceback JAX chains to it: ``JaxStackTraceBeforeTransformation``, where
    the backward pass's operation was traced)."""
    import jax

    try:
        with jax.debug_nans(True):
            jax.grad(f)(0.0)
    except FloatingPointError as exc:
        link: BaseException | None = exc
        while link is not None:
            frames = traceback.extract_tb(link.__traceback__)
            lines = [fr.lineno for fr in frames if fr.filename == "snippet.py"]
            if lines:
                return str(exc), lines[-1]
            link = link.__cause__ or link.__context__
        return str(exc), None
    raise AssertionError("JAX found no NaN in grad(f)(0.0)")


def _wait_for(page: Any, selector: str, panel: str) -> Any:
    """The element, or a failure that says what the pane shows instead."""
    try:
        return page.wait_for_selector(selector, timeout=30_000)
    except Exception as exc:
        raise AssertionError(f"no {selector}; {panel} shows: {page.inner_text(panel)!r}") from exc


def _editor_cursor_line(page: Any) -> str:
    """The editor's line holding the cursor (its gutter's active line number)."""
    return str(page.inner_text(".cm-editor:has([data-testid=code]) .cm-activeLineGutter")).strip()


def test_autodiff_stepper_and_checks_on_the_nan_gradient(page: Any) -> None:
    jax_said = _jax_says()
    assert ("div", SQRT_LINE) in jax_said["residuals"], jax_said  # JAX: sqrt's 0.5 / y
    assert jax_said["nan_line"] == SQRT_LINE, jax_said

    set_code(page, CODE)
    page.fill("#args", "0.0")
    clear_pipeline(page)
    add_step(page, "grad")
    page.click("details.xla-outputs summary")
    page.check("#out-autodiff")
    page.check("#out-trace_values")
    page.check("#check-nans")  # the checks: a section of the same "What to compute"
    page.click("[data-testid=code]")
    page.keyboard.press("ControlOrMeta+End")
    page.keyboard.press("Control+Enter")
    # the checks' NaN is a result, not an error: the run ends ok
    assert wait_done(page, 180_000) == "ok", page.inner_text("#panel-errors")

    # --- Autodiff: the stages as tabs, each path's residuals with their lines --------
    show_tab(page, "autodiff")
    _wait_for(page, "#panel-autodiff .autodiff-stages button", "#panel-autodiff")
    stages = page.locator("#panel-autodiff .autodiff-stages button").all_inner_texts()
    assert {
        "direct · forward",
        "direct · transpose",
        "classic · JVP",
        "classic · transpose",
    } <= set(stages), stages
    page.click("#panel-autodiff .autodiff-stages button:text-is('classic · JVP')")
    jvp_text = page.inner_text("#panel-autodiff [data-testid=out-autodiff]")
    missing = [p for p in jax_said["jvp_primitives"] if p not in jvp_text]
    assert missing == [], (missing, jvp_text)
    rows = [
        [c.strip() for c in row.locator("td").all_inner_texts()]
        for row in page.locator("#panel-autodiff table.autodiff").first.locator("tbody tr").all()
    ]
    # cells: name, aval, bytes, source, line; JAX saves the div (0.5 / sqrt x) of line 4
    assert ["div", str(SQRT_LINE)] in [r[3:5] for r in rows], rows

    # --- Stepper: the first bad value, and its jump to the sqrt line -----------------
    show_tab(page, "trace_values")
    jump = _wait_for(page, "[data-testid=trace-first-inf]", "#panel-trace_values")
    assert jump.inner_text() == f"Jump to line {SQRT_LINE}"
    first = page.locator("#panel-trace_values .tv-first").all_inner_texts()
    assert first[0].startswith("First Inf:") and " div" in first[0], first
    assert any(t.startswith("First NaN:") and " mul" in t for t in first), first
    assert _editor_cursor_line(page) != str(SQRT_LINE)
    jump.click()
    assert _editor_cursor_line(page) == str(SQRT_LINE)
    assert page.locator("#panel-trace_values tr.tv-flash").count() == 1

    # --- Checks: the NaN, JAX's words, at its line -----------------------------------
    show_tab(page, "checks")
    nans = _wait_for(page, "#panel-checks li[data-check=nans]", "#panel-checks")
    assert nans.get_attribute("data-status") == "failed"
    assert nans.query_selector(".check-message").inner_text().strip() == jax_said["nan_message"]
    line = nans.query_selector("[data-testid=check-line]")
    assert line.inner_text() == f"line {SQRT_LINE}"
    page.click("[data-testid=code]")
    page.keyboard.press("ControlOrMeta+End")
    assert _editor_cursor_line(page) != str(SQRT_LINE)
    line.click()
    assert _editor_cursor_line(page) == str(SQRT_LINE)
