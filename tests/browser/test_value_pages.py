"""The Value pane's pages (docs/api.md "Value pages"): a value of more leaves than one
event describes says which it shows; "next leaves" and "previous leaves" run the program
again with ``value_from``, as does a leaf the data budget left without its values ("show
from here"); the next plain run shows the first page again."""

from __future__ import annotations

from typing import Any

from .test_page import clear_pipeline, set_code, show_tab, wait_done

#: 300 leaves of 16 x 16 (256 elements each: the budget of 65,536 holds the first 256),
#: then 4,000 scalars: 4,300 leaves, more than the 4,096 one event describes
CODE = (
    "import jax.numpy as jnp\n\n"
    "def f(x):\n"
    "    tiles = [jnp.full((16, 16), i, jnp.float32) + x for i in range(300)]\n"
    "    return tiles + [x * i for i in range(4000)]\n"
)


def _page_line(page: Any) -> str:
    return str(page.inner_text("#panel-value [data-testid=value-page]"))


def _first_row(page: Any) -> str:
    return str(page.inner_text("#panel-value table.leaves tbody tr >> nth=0"))


def _click_and_wait(page: Any, selector: str) -> None:
    sent = page.evaluate("() => window.jaxplay.runsSent()")
    page.click(selector)
    page.wait_for_function(f"() => window.jaxplay.runsSent() > {sent}")
    assert wait_done(page, 120_000) == "ok"
    show_tab(page, "value")


def test_a_value_of_many_leaves_is_shown_a_page_at_a_time(page: Any) -> None:
    set_code(page, CODE)
    clear_pipeline(page)
    page.fill("#args", "(jnp.float32(1.0),)")
    page.keyboard.press("ControlOrMeta+Enter")
    assert wait_done(page, 120_000) == "ok"
    show_tab(page, "value")
    line = _page_line(page)
    assert "leaves 1–4,096 of 4,300" in line
    assert "leaves 257–4,096 without their values: past the 65,536-element budget" in line
    assert page.locator("[data-testid=value-previous]").count() == 0
    assert _first_row(page).startswith("[0]")

    # the next page: its first leaf is the value's 4,097th, with its values
    _click_and_wait(page, "[data-testid=value-next]")
    assert "leaves 4,097–4,300 of 4,300" in _page_line(page)
    assert page.locator("[data-testid=value-next]").count() == 0
    first = _first_row(page)
    assert first.startswith("[4096]") and "[3796]" in first  # x * 3796, x = 1

    # and back
    _click_and_wait(page, "[data-testid=value-previous]")
    assert "leaves 1–4,096 of 4,300" in _page_line(page)

    # a leaf past the data budget says so; its button shows the leaves from it
    for _ in range(2):  # rows come 100 at a time: leaf 257 is in the third hundred
        page.click("#panel-value table.leaves .vt-more")
    leaf = page.locator("#panel-value [data-testid=value-leaf-from] >> nth=0")
    assert leaf.inner_text() == "data past the 65,536-element budget: show from here"
    sent = page.evaluate("() => window.jaxplay.runsSent()")
    leaf.click()
    page.wait_for_function(f"() => window.jaxplay.runsSent() > {sent}")
    assert wait_done(page, 120_000) == "ok"
    show_tab(page, "value")
    assert "leaves 257–4,300 of 4,300" in _page_line(page)
    first = _first_row(page)
    assert first.startswith("[256]") and "[257, 257, 257" in first  # full(256) + 1
    assert page.locator("#panel-value [data-testid=value-leaf-from]").count() == 0

    # a plain run shows the first page again: value_from is not kept
    page.keyboard.press("ControlOrMeta+Enter")
    assert wait_done(page, 120_000) == "ok"
    show_tab(page, "value")
    assert "leaves 1–4,096 of 4,300" in _page_line(page)
