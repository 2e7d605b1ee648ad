"""The passes, asm, memory and remarks panes in a real browser, against the real
server and jailed pool: ticked under "XLA outputs", run, read."""

from __future__ import annotations

from typing import Any

from .test_page import add_step, clear_pipeline, set_code, set_field, show_tab, wait_done

CODE = """import jax
import jax.numpy as jnp

g = jax.jit(lambda x: x * 2)
g(jnp.ones(3))
g(jnp.ones(4))

def f(w, x):
    h = jnp.tanh(x @ w)
    return jnp.sum(jnp.sin(h) ** 2)
"""


def test_what_xla_did_panes(page: Any) -> None:
    set_code(page, CODE)
    set_field(page, "#args", "jnp.ones((16, 16)), jnp.ones((8, 16))")
    clear_pipeline(page)
    add_step(page, "grad")
    add_step(page, "jit")
    page.click("details.xla-outputs summary")
    for name in ("passes", "asm", "memory", "remarks"):
        page.check(f"#out-{name}")
    page.click("#run")
    assert wait_done(page) == "ok", page.inner_text(".progress")

    show_tab(page, "passes")
    page.wait_for_selector(".pass-list li")  # the pane's code loads on first use
    items = page.locator(".pass-list li")
    assert items.count() >= 3
    names = items.locator(".pass-name").all_inner_texts()
    assert "before" in names[0]
    # the selected pass's before/after diff, with changes marked
    items.nth(2).click()
    assert page.locator(".pass-list li.selected .pass-name").inner_text() == names[2]
    page.wait_for_selector(".pass-diff .cm-mergeView .cm-changedLine")
    # the filter keeps the first item and the passes whose names match
    page.fill(".pass-bar input[type=search]", names[-1])
    shown = page.locator(".pass-list li .pass-name").all_inner_texts()
    assert shown[0] == names[0] and names[-1] in shown and len(shown) < len(names)

    show_tab(page, "asm")
    code = page.locator("[data-testid=asm-code]").first.inner_text()
    assert len(code.strip().splitlines()) > 1

    show_tab(page, "memory")
    assert page.locator("[data-testid=memory-peak]").inner_text().strip() not in ("", "—")
    lines = page.locator("table.memory tbody td:last-child").all_inner_texts()
    assert {"9", "10"} & set(lines)

    show_tab(page, "remarks")
    text = page.locator(".remarks").inner_text()
    assert "line 6" in text and "f32[4]" in text
