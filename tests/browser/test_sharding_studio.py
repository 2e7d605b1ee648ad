"""The sharding studio in a real browser, against the real server and jailed pool:
the mesh builder, the Sharding tab's grids and collectives, pmap's shard_map form."""

from __future__ import annotations

from typing import Any

from .test_page import add_step, clear_pipeline, set_code, set_field, show_tab, wait_done


def test_a_2d_sharded_layer_shows_its_grids_and_all_reduce_at_its_line(page: Any) -> None:
    page.select_option("#examples", "sharding-2d-layer")
    status = wait_done(page)
    assert status == "ok", page.locator(".progress").inner_text()
    show_tab(page, "sharding")
    page.wait_for_selector(".sharding-array")  # the pane's code loads on first use
    figures = page.locator(".sharding-array")
    assert figures.count() == 3  # x, w and the output
    # x over the 2 x 2 mesh: four blocks, one device each, each in its own colour
    x = figures.nth(0)
    assert "P('x', 'y')" in x.inner_text()
    assert x.locator("text.sharding-devices").all_text_contents() == ["0", "1", "2", "3"]
    fills = {x.locator("rect[fill^=hsl]").nth(i).get_attribute("fill") for i in range(4)}
    assert len(fills) == 4
    # the contraction over y: an all-reduce, linked to `y = x @ w` (line 18)
    rows = page.locator("table.collectives tbody tr")
    kinds = rows.locator("td:first-child").all_inner_texts()
    assert "all-reduce" in kinds
    row = rows.nth(kinds.index("all-reduce"))
    assert "{0,1} {2,3}" in row.inner_text()
    row.locator("td:nth-child(4) button.linklike").click()  # the code column
    assert "y = x @ w" in page.locator(".cm-activeLine").first.inner_text()


def test_the_mesh_builder_says_what_is_missing_and_a_run_uses_it(page: Any) -> None:
    set_code(page, "def f(x, w):\n    return x @ w\n")
    set_field(page, "#args", "(jnp.ones((8, 4)), jnp.ones((4, 2)))")
    clear_pipeline(page)
    add_step(page, "jit")
    page.click("[data-testid=mesh-builder] summary")
    page.check("[data-testid=mesh-on]")
    # a box per parameter of f, named after it
    page.wait_for_selector("#spec-in-1")
    assert page.locator("label[for=spec-in-0]").inner_text().startswith("x")
    assert "needs 4 devices" in page.locator("[data-testid=mesh-problem]").inner_text()
    set_field(page, "#devices", "4")
    set_field(page, "#spec-in-0", "q")
    assert "not an axis of the mesh" in page.locator("[data-testid=mesh-problem]").inner_text()
    set_field(page, "#spec-in-0", "x, None")
    assert page.locator("[data-testid=mesh-problem]").inner_text().strip() == ""
    page.click("#run")
    assert wait_done(page) == "ok"
    show_tab(page, "sharding")
    page.wait_for_selector(".sharding-array")  # the pane's code loads on first use
    assert "P('x', None)" in page.locator(".sharding-array").first.inner_text()


def _set_behind_focus(page: Any, selector: str, value: str) -> None:
    """Changes a field as an input event does, without moving the focus: what the page
    does behind a box being typed into (the entry follower, a settled code edit)."""
    page.evaluate(
        "([s, v]) => { const e = document.querySelector(s); e.value = v;"
        " e.dispatchEvent(new Event('input', { bubbles: true })); }",
        [selector, value],
    )


def test_a_box_being_typed_into_keeps_its_text_and_focus_when_the_builder_redraws(
    page: Any,
) -> None:
    set_code(page, "def f(x, w):\n    return x @ w\n\ndef g(x, w, b):\n    return x @ w + b\n")
    set_field(page, "#entry", "f")
    clear_pipeline(page)
    add_step(page, "jit")
    page.click("[data-testid=mesh-builder] summary")
    page.check("[data-testid=mesh-on]")
    page.wait_for_selector("#spec-in-1")
    problem = page.locator("[data-testid=mesh-problem]")
    # the device count changes while a box has the focus: the boxes stay, the text
    # typed next lands in the box and the problem line follows both
    page.focus("#spec-in-0")
    _set_behind_focus(page, "#devices", "4")
    page.keyboard.insert_text("q")
    assert page.input_value("#spec-in-0") == "q"
    assert "not an axis of the mesh" in problem.inner_text()
    # the entry gains a parameter: three boxes now, the focus and caret kept
    _set_behind_focus(page, "#entry", "g")
    page.wait_for_selector("#spec-in-2")
    assert page.evaluate("document.activeElement.id") == "spec-in-0"
    page.keyboard.press("Backspace")
    page.keyboard.insert_text("x, None")
    assert page.input_value("#spec-in-0") == "x, None"
    assert problem.inner_text().strip() == ""


def test_pmap_becomes_its_shard_map_form_in_one_click(page: Any) -> None:
    page.select_option("#examples", "pmap")
    assert wait_done(page) == "ok"
    page.click("[data-testid=pipeline-A] .as-shard-map")
    names = page.locator("[data-testid=pipeline-A] .step-name").all_inner_texts()
    assert names == ["shard_map", "jit"]
    assert page.input_value("#mesh-names") == "devices"
    page.click("#run")
    assert wait_done(page) == "ok"
    show_tab(page, "sharding")
    page.wait_for_selector(".sharding-array")  # the pane's code loads on first use
    assert page.locator(".sharding-array").count() == 2


def test_each_collective_says_which_sharding_forced_it_and_remats_are_at_their_line(
    page: Any,
) -> None:
    page.select_option("#examples", "sharding-provenance")
    status = wait_done(page)
    assert status == "ok", page.locator(".progress").inner_text()
    show_tab(page, "sharding")
    page.wait_for_selector("table.collectives")  # the pane's code loads on first use
    rows = page.locator("table.collectives tbody tr")
    kinds = rows.locator("td:first-child").all_inner_texts()
    # the first constraint moves a's rows' axis: from the argument to that constraint
    moved = rows.nth(kinds.index("all-to-all")).locator(".collective-origin")
    said = moved.inner_text()
    assert "from argument a P('x', None, None)" in said
    assert "to with_sharding_constraint P(None, None, 'x')" in said
    moved.locator("button.linklike", has_text="line 20").click()
    assert 'P(None, None, "x")' in page.locator(".cm-activeLine").first.inner_text()
    # XLA's involuntary full rematerialization, at the line of the value it copies
    remat = page.locator(".remarks-remat li")
    assert remat.count() == 1
    assert "{mesh['x'=2,'y'=4], [{}, {}, {'x'}]}" in remat.inner_text()
    assert "{mesh['x'=2,'y'=4], [{}, {'y'}, {}]}" in remat.inner_text()
    remat.locator("button.linklike").click()
    assert (
        "c = jax.lax.with_sharding_constraint" in page.locator(".cm-activeLine").first.inner_text()
    )
