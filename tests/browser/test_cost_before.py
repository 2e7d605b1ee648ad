"""The cost pane's figures before optimisation are asked for, not made by every run
(they cost a second conversion of the module to HLO): the pane offers them, one click
runs the program again with ``cost_before``, and they are shown beside the optimised
module's; the choice is kept for the runs after, until the pane's "Stop making them"."""

from __future__ import annotations

from typing import Any

from .test_page import set_code, show_tab, wait_done

CODE = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.sin(x) @ x.T)\n"


def _cost_text(page: Any) -> str:
    show_tab(page, "cost")
    page.wait_for_selector("#panel-cost table.cost")
    return str(page.inner_text("#panel-cost"))


def test_the_figures_before_optimisation_come_when_asked(page: Any) -> None:
    set_code(page, CODE)
    page.fill("#args", "(jnp.ones((8, 8)),)")
    page.keyboard.press("ControlOrMeta+Enter")
    assert wait_done(page) == "ok"
    assert "before optimisation" not in _cost_text(page).split("Show the figures")[0]
    sent = page.evaluate("() => window.jaxplay.runsSent()")
    page.click("[data-testid=cost-before]")
    page.wait_for_function(f"() => window.jaxplay.runsSent() > {sent}")
    assert wait_done(page) == "ok"
    page.wait_for_selector("#panel-cost tr.section >> text=before optimisation")
    assert page.locator("[data-testid=cost-before]").count() == 0
    # kept: the next run makes them too, until they are turned off
    page.keyboard.press("ControlOrMeta+Enter")
    assert wait_done(page) == "ok"
    page.wait_for_selector("#panel-cost tr.section >> text=before optimisation")
    page.click("[data-testid=cost-before-off]")
    page.keyboard.press("ControlOrMeta+Enter")
    assert wait_done(page) == "ok"
    page.wait_for_selector("[data-testid=cost-before]")
    assert page.locator("#panel-cost tr.section >> text=before optimisation").count() == 0
