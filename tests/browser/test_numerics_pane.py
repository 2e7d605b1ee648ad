"""The Numerics pane (issue 49) in a real browser, on a cancellation: ``(1 - cos x) /
x**2`` at small x. The error the pane shows is checked against JAX called directly in
this process with float64 (x64 on, in a context), not against our own events; the
editor's band sits on the sub's line only; one click compares precision settings."""

from __future__ import annotations

import math
from typing import Any

from .test_page import add_step, clear_pipeline, set_code, show_tab, wait_done
from .test_understanding_panes import _editor_cursor_line, _wait_for

CODE = "import jax.numpy as jnp\n\ndef f(x):\n    c = jnp.cos(x)\n    top = 1 - c\n    return top / x**2\n"
SUB_LINE = 5
ARGS = "jnp.array([1e-3, 1e-2, 1.0], jnp.float32)"


def _jax_says() -> dict[str, float]:
    """The sub's largest relative error against float64, as plain JAX computes it."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    x32 = jnp.array([1e-3, 1e-2, 1.0], jnp.float32)
    top32 = np.asarray(1 - jnp.cos(x32), np.float64)
    with jax.enable_x64(True):
        top64 = np.asarray(1 - jnp.cos(jnp.asarray(np.asarray(x32, np.float64))))
    return {"sub": float((np.abs(top32 - top64) / np.abs(top64)).max())}


def test_the_numerics_pane_names_the_cancellation_and_bands_its_line(page: Any) -> None:
    want = _jax_says()
    set_code(page, CODE)
    page.fill("#args", ARGS)
    clear_pipeline(page)
    add_step(page, "jit")
    page.click("details.xla-outputs summary")
    page.check("#out-numerics")
    page.click("[data-testid=code]")  # closes "What to compute"
    page.keyboard.press("Control+Enter")
    assert wait_done(page, 180_000) == "ok", page.inner_text("#panel-errors")

    show_tab(page, "numerics")
    _wait_for(page, "[data-testid=numerics-table]", "#panel-numerics")
    rows = [
        [c.strip() for c in row.locator("td").all_inner_texts()]
        for row in page.locator("#panel-numerics tr.nx-row").all()
    ]
    assert [r[2] for r in rows] == ["cos", "sub", "integer_pow", "div"], rows
    sub = rows[1]
    assert sub[3] == str(SUB_LINE)
    # the error column, against JAX in float64 (the pane writes 3 significant digits)
    assert math.isclose(float(sub[6]), want["sub"], rel_tol=5e-3), (sub, want)
    hint = page.locator("#panel-numerics [data-testid=numerics-hint]").all_inner_texts()
    assert len(hint) == 1 and "a ≈ b" in hint[0], hint
    assert page.locator("#panel-numerics tr.nx-worst").get_attribute("data-row") == "1"
    # the jit comparison: this program gives the same under jit
    assert "one by one" in page.inner_text("[data-testid=numerics-jit]")

    # the editor's band: the sub's line, where the error is born; not the div's
    band = page.locator(".cm-numerics-line")
    assert band.count() == 1
    assert band.first.get_attribute("data-numerics-line") == str(SUB_LINE)
    assert band.first.get_attribute("data-born-level") == "3"

    # the worst row's jump selects its line in the editor
    page.click("[data-testid=code]")
    page.keyboard.press("ControlOrMeta+End")
    page.click("[data-testid=numerics-worst]")
    assert _editor_cursor_line(page) == str(SUB_LINE)

    # one click: the same run under each precision setting, side by side
    page.click("[data-testid=numerics-compare]")
    assert wait_done(page, 180_000) == "ok", page.inner_text("#panel-errors")
    show_tab(page, "numerics")
    table = _wait_for(page, "[data-testid=numerics-precision] tbody", "#panel-numerics")
    settings = [r.split("\t")[0] for r in table.inner_text().splitlines()]
    assert len(settings) == 5 and settings[-1].endswith("(emulated)"), settings
    f64 = (
        page.locator("[data-testid=numerics-precision] tbody tr")
        .nth(2)
        .locator("td")
        .all_inner_texts()
    )
    assert f64[0].startswith("float64") and float(f64[1]) < 1e-12, f64
