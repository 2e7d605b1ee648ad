"""Big outputs in the page (issue 32), in a real browser: text panes draw only what is
in view, the graph of thousands of nodes is laid out by the worker and drawn on a
canvas, and search, hover, pin and zoom-to-line work on it. Behaviour, not speed:
benchmarks/page/page_scale.py measures the speed."""

from __future__ import annotations

from typing import Any

from .test_page import clear_pipeline, output_text, set_code, wait_done

#: 3,000 equations at the top level, no jit: over the 1,200 top-level nodes the page
#: refused to draw as a graph before
BIG = """import jax.numpy as jnp


def f(x):
    for _ in range(1500):
        x = jnp.sin(x) * 0.5
    return x
"""
#: the code line of the loop's body (every sin and mul comes from it)
BODY = 6


def run_big(page: Any) -> None:
    set_code(page, BIG)
    clear_pipeline(page)
    page.fill("#entry", "f")
    page.click("#run")
    assert wait_done(page, 240_000) == "ok", page.inner_text("#panel-errors")


def drawn_lines(page: Any, kind: str) -> list[str]:
    return page.eval_on_selector_all(
        f"[data-testid=out-{kind}] .cm-line", "ls => ls.map(l => l.textContent.trim())"
    )


def test_a_big_text_pane_draws_only_its_viewport_and_scrolls_to_its_end(page: Any) -> None:
    run_big(page)
    text = output_text(page, "jaxpr")
    lines = text.split("\n")
    assert len(lines) > 3000
    page.click("#tab-jaxpr")
    assert 0 < len(drawn_lines(page, "jaxpr")) < 300
    # a pane not on show (the HLO) holds its text, drawn no more than its viewport
    page.wait_for_function(
        "() => (window.jaxplay.text('hlo') || '').split('\\n').length > 1000", polling=200
    )
    page.wait_for_timeout(1500)  # panes not on show take their text when the page is idle
    assert page.locator("[data-testid=out-hlo]").evaluate("e => e.closest('[hidden]') !== null")
    assert 0 < len(drawn_lines(page, "hlo")) < 300
    assert page.evaluate("() => document.getElementsByTagName('*').length") < 20_000
    # scrolled to its end, the pane shows the text's last line, banded and linked
    page.locator("[data-testid=out-jaxpr]").evaluate(
        "e => { const s = e.closest('.cm-scroller'); s.scrollTop = s.scrollHeight; }"
    )
    last = text.rstrip().split("\n")[-1].strip()
    page.wait_for_function(
        "(last) => [...document.querySelectorAll('[data-testid=out-jaxpr] .cm-line')]"
        ".some(l => l.textContent.trim() === last)",
        arg=last,
        polling=100,
    )
    assert len(drawn_lines(page, "jaxpr")) < 300
    banded = page.locator(f"[data-testid=out-jaxpr] .cm-line.cm-band[data-src-line='{BODY}']")
    assert banded.count() > 10
    banded.last.hover()
    page.wait_for_selector(f"[data-testid=code] .cm-line.cm-linked[data-src-line='{BODY}']")
    assert page.locator("[data-testid=out-jaxpr] .cm-line.cm-linked").count() > 10


def test_a_graph_over_the_old_limit_is_laid_out_by_the_worker_and_drawn_on_a_canvas(
    page: Any,
) -> None:
    run_big(page)
    page.click("#tab-graph")
    page.wait_for_selector("#panel-graph[data-graph-state=drawn] canvas.graph-canvas")
    info = page.evaluate("() => window.jaxplay.graphInfo()")
    assert info["renderer"] == ["canvas"] and info["layout"] == ["layered"], info
    assert info["drawn"] > 3000 and info["layoutMs"] > 0, info
    assert page.locator("[data-testid=graph-problem]").count() == 0
    # laid out in the worker: its script was loaded, and no element per node
    workers = page.evaluate(
        "() => performance.getEntriesByType('resource').map(e => e.name).filter(n => /\\/worker-[^/]*\\.js$/.test(n))"
    )
    assert workers, "the layout worker's script was never loaded"
    assert page.locator("#panel-graph g.gnode").count() == 0
    assert (
        page.evaluate(
            "() => document.getElementById('panel-graph').getElementsByTagName('*').length"
        )
        < 100
    )

    # search: the sin nodes are found, and the first brought into view
    page.fill("[data-testid=graph-search]", "sin")
    assert page.inner_text("[data-testid=graph-found]").endswith("of 1500")
    page.press("[data-testid=graph-search]", "Enter")
    assert page.inner_text("[data-testid=graph-found]") == "1 of 1500"
    canvas = page.locator("canvas.graph-canvas").bounding_box()

    def in_view() -> dict[str, float]:
        cur = page.evaluate("() => window.jaxplay.graphInfo().current")
        box, view = cur["box"], cur["view"]
        assert box["x"] >= 0 and box["x"] + box["width"] <= view["width"], cur
        assert box["y"] >= 0 and box["y"] + box["height"] <= view["height"], cur
        return box

    box = in_view()
    # hover: the node's code line lights up, the tooltip documents the primitive
    page.wait_for_timeout(200)  # the canvas draws on the next frame
    x = canvas["x"] + box["x"] + box["width"] / 2
    y = canvas["y"] + box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.wait_for_selector(f"[data-testid=code] .cm-line.cm-linked[data-src-line='{BODY}']")
    assert "sin" in page.inner_text("#graph-tip")
    # a click pins its line; panned far away, "zoom to pinned line" brings it back
    page.mouse.click(x, y)
    assert page.inner_text("[data-testid=pinned]").startswith(f"📌 line {BODY}")
    page.locator("canvas.graph-canvas").focus()
    for _ in range(6):
        page.keyboard.press("PageDown")
    page.wait_for_timeout(200)
    cur = page.evaluate("() => window.jaxplay.graphInfo().current")
    assert cur["box"]["y"] + cur["box"]["height"] < 0, cur
    page.click("text=zoom to pinned line")
    page.wait_for_timeout(200)
    in_view()


#: a model-like value of 2 x 250 leaves: 250 layers' parameters, as a deep model's
#: gradient reads (the tree view: two keys deep). The layers share two arrays: 500
#: distinct outputs take XLA ~5 s to compile on a jail's one CPU, and past the 20 s
#: default on a loaded machine; the pane's pages are what is checked here.
MANY_LEAVES = """import jax.numpy as jnp


def f(x):
    b, w = x + 1, x * 2
    return {f"layer{i:03d}": {"b": b, "w": w} for i in range(250)}
"""


def test_a_value_of_many_leaves_is_drawn_a_page_at_a_time(page: Any) -> None:
    from .test_page import show_tab

    set_code(page, MANY_LEAVES)
    clear_pipeline(page)
    page.fill("#entry", "f")
    page.fill("#args", "(jnp.ones(3),)")
    page.click("#run")
    assert wait_done(page, 120_000) == "ok", page.inner_text("#panel-errors")
    show_tab(page, "value")
    tree = page.locator("#panel-value .value-tree")
    assert "500 leaves in all" in tree.locator(".vt-total").inner_text()
    groups = tree.locator(":scope > details.vt-group")
    # the first page of the 250 layers, each open with its two leaves; the rest behind a button
    assert groups.count() == 100
    assert tree.locator(".vt-leaf").count() == 200
    more = tree.locator(":scope > button.vt-more")
    assert more.inner_text() == "show 100 more of 150"
    more.click()
    assert groups.count() == 200
    assert tree.locator(":scope > button.vt-more").inner_text() == "show 50 more of 50"
    tree.locator(":scope > button.vt-more").click()
    assert groups.count() == 250 and tree.locator("button.vt-more").count() == 0
    assert "layer249" in groups.last.inner_text() and "layer000" in groups.first.inner_text()
    # the flat table likewise: 100 rows, then the next page on a click
    page.click("#panel-value .vt-toggle button:has-text('flat table')")
    rows = page.locator("#panel-value table.leaves tbody tr:not(:has(button))")
    assert rows.count() == 100
    page.click("#panel-value table.leaves button.vt-more")
    assert rows.count() == 200
