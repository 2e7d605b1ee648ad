"""The Graph tab, documentation on hover, and pinned links (issue 15), in a real browser."""

from __future__ import annotations

from typing import Any

from .test_page import show_tab, wait_done


def hover_word(page: Any, pane: str, word: str) -> None:
    """Moves the pointer onto the first whole `word` drawn in an output pane: not a
    part of an instruction name (`%tanh.3`) or of a metadata path (`jit(f)/tanh`)."""
    box = page.evaluate(
        """([pane, word]) => {
            const root = document.querySelector(`[data-testid=out-${pane}]`);
            const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
            for (let n = walker.nextNode(); n; n = walker.nextNode()) {
                const m = new RegExp(`(^|[^\\\\w.%/])(${word})(?![\\\\w.])`).exec(n.textContent);
                if (!m) continue;
                n.parentElement.scrollIntoView({block: "center"});  // drawn, but maybe below the fold
                const r = document.createRange();
                const at = m.index + m[1].length;
                r.setStart(n, at); r.setEnd(n, at + word.length);
                const b = r.getBoundingClientRect();
                return {x: b.x + b.width / 2, y: b.y + b.height / 2};
            }
            return null;
        }""",
        [pane, word],
    )
    assert box, f"{word} is not drawn in the {pane} pane"
    page.mouse.move(box["x"], box["y"])


def test_the_graph_shows_nodes_groups_and_links_them_to_the_code(page: Any) -> None:
    page.select_option("#examples", "scan-vs-loop")
    assert wait_done(page) == "ok"
    show_tab(page, "graph")
    page.wait_for_selector("#panel-graph svg.graph g.gnode")
    assert page.evaluate("window.jaxplay.graphNodes()") > 8
    # jit and scan are groups, open, with the scan body's tanh inside
    groups = page.locator("#panel-graph g.gnode.kind-group")
    labels = [groups.nth(i).get_attribute("data-label") for i in range(groups.count())]
    assert "jit" in labels and "scan" in labels, labels
    tanh = page.locator("#panel-graph g.gnode[data-op=tanh]").first
    src = tanh.get_attribute("data-src-line")
    assert src == "16"  # carry = jnp.tanh(0.9 * carry + x) in examples/scan_vs_python_loop.py
    assert "band-7" in (tanh.get_attribute("class") or "")
    # hover: the code line lights up, and a tooltip documents the primitive
    tanh.hover()
    page.wait_for_selector("[data-testid=code] .cm-line.cm-linked[data-src-line='16']")
    tip = page.locator("#graph-tip[role=tooltip]")
    assert tip.is_visible()
    assert "tanh" in tip.inner_text() and "rules:" in tip.inner_text()
    # hovering the code line lights the node up
    page.mouse.move(0, 0)
    page.locator("[data-testid=code] .cm-line[data-src-line='16']").hover()
    page.wait_for_selector("#panel-graph g.gnode.linked[data-op=tanh]")
    # a group collapses to one node and opens again
    scan = page.locator("#panel-graph g.gnode.kind-group[data-label=scan]")
    before = page.evaluate("window.jaxplay.graphNodes()")
    scan.locator("text.glabel").click()
    page.wait_for_selector("#panel-graph g.gnode.kind-group[data-label=scan][aria-expanded=false]")
    assert page.evaluate("window.jaxplay.graphNodes()") < before
    assert page.locator("#panel-graph g.gnode[data-op=tanh]").count() == 0
    page.locator("#panel-graph g.gnode.kind-group[data-label=scan] text.glabel").click()
    page.wait_for_selector("#panel-graph g.gnode[data-op=tanh]")


def test_the_hlo_graph_groups_fusions_and_compare_mode_shows_two(page: Any) -> None:
    page.select_option("#examples", "jacfwd-jacrev")
    assert wait_done(page) == "ok", page.inner_text("#panel-errors")
    show_tab(page, "graph")
    page.wait_for_selector("#panel-graph .graph-col svg.graph g.gnode")
    assert page.locator("#panel-graph .graph-col").count() == 2
    assert page.locator("#panel-graph .graph-col[data-pipeline='0'] g.gnode").count() >= 3
    page.click("[data-graph-source=hlo]")
    page.wait_for_selector("#panel-graph g.gnode[data-op=fusion]")
    assert page.locator("#panel-graph .graph-col").count() == 2
    fusion = page.locator(
        "#panel-graph .graph-col[data-pipeline=main] g.gnode[data-op=fusion]"
    ).first
    fusion.locator("text.glabel").hover()
    assert "fused" in page.inner_text("#graph-tip")


def test_a_primitive_and_an_op_have_documentation_on_hover(page: Any) -> None:
    page.select_option("#examples", "grad-loss")
    assert wait_done(page) == "ok"
    hover_word(page, "jaxpr", "tanh")
    tip = page.locator(".cm-editor [role=tooltip]")
    tip.wait_for()
    text = tip.inner_text()
    assert "tanh" in text and "jvp" in text and "JAX docs" in text
    assert tip.locator("a").get_attribute("href").startswith("https://docs.jax.dev/")
    page.mouse.move(0, 0)
    show_tab(page, "stablehlo")
    hover_word(page, "stablehlo", "stablehlo.tanh")
    tip = page.locator(".cm-editor [role=tooltip]")
    tip.wait_for()
    assert "hyperbolic tangent" in tip.inner_text()
    assert tip.locator("a").get_attribute("href").startswith("https://openxla.org/stablehlo/spec")
    page.mouse.move(0, 0)
    show_tab(page, "hlo")
    hover_word(page, "hlo", "tanh")
    page.locator(".cm-editor [role=tooltip]").wait_for()


def test_a_click_pins_a_linked_line_until_clicked_again(page: Any) -> None:
    page.select_option("#examples", "grad-loss")
    assert wait_done(page) == "ok"
    line = page.locator("[data-testid=out-jaxpr] .cm-line[data-src-line='20']").first
    line.click()
    page.mouse.move(0, 0)
    assert page.locator("[data-testid=pinned]").inner_text().startswith("📌 line 20")
    page.wait_for_selector("[data-testid=code] .cm-line.cm-pinned.cm-linked[data-src-line='20']")
    # pinned everywhere: the other text panes and the graph
    for kind in ("stablehlo", "hlo"):
        show_tab(page, kind)
        page.wait_for_selector(f"[data-testid=out-{kind}] .cm-line.cm-pinned[data-src-line='20']")
    show_tab(page, "graph")
    page.wait_for_selector("#panel-graph g.gnode.pinned[data-src-line='20']")
    # hovering another line shows that one, and leaving brings the pinned one back
    page.locator("[data-testid=code] .cm-line[data-src-line='21']").hover()
    page.wait_for_selector("[data-testid=code] .cm-line.cm-linked[data-src-line='21']")
    page.mouse.move(0, 0)
    page.wait_for_selector("[data-testid=code] .cm-line.cm-linked[data-src-line='20']")
    # clicking it again (here: its node in the graph) unpins
    page.locator("#panel-graph g.gnode.pinned[data-src-line='20']").first.click()
    page.mouse.move(0, 0)
    page.wait_for_selector("[data-testid=code] .cm-line.cm-pinned", state="detached")
    assert page.locator("[data-testid=pinned]").is_hidden()
    # the editor's line numbers pin too
    page.click("[data-testid=code] >> xpath=../.. >> .cm-gutterElement:text-is('21')")
    page.mouse.move(0, 0)
    page.wait_for_selector("[data-testid=code] .cm-line.cm-pinned[data-src-line='21']")


def test_the_graph_works_under_the_content_security_policy(page: Any) -> None:
    """The layout worker (elkjs inside it) is a module of this origin: no eval, no blob:
    worker. The page fixture fails the test on anything the server's
    Content-Security-Policy blocks."""
    response = page.goto("/")
    csp = response.headers.get("content-security-policy", "")
    assert "default-src 'self'" in csp and "unsafe-eval" not in csp, csp
    assert "worker-src 'self';" in csp + ";" and "blob:" not in csp, csp
    page.wait_for_selector("[data-testid=code]")
    page.click("#run")
    assert wait_done(page) == "ok"
    show_tab(page, "graph")
    page.wait_for_selector("#panel-graph svg.graph g.gnode")
    page.click("[data-graph-source=hlo]")
    page.wait_for_selector("#panel-graph g.gnode[data-op=fusion]")
