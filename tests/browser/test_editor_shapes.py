"""Shapes and completion in the editor (issue 23): after a run, hovering an expression
shows its shape and dtype, a `# ^?` line shows the shape at its caret; typing `jnp.su`
offers `sum` with its signature, from the page's own index (no server call)."""

from __future__ import annotations

from typing import Any

from .test_page import set_code, wait_done

CODE = "def f(x, w):\n    y = jnp.tanh(x @ w)\n    #              ^?\n    return jnp.sum(y)\n"


def _hover_char(page: Any, line: int, char: str) -> None:
    """Moves the pointer onto the first ``char`` of the editor's line ``line`` (from 1)."""
    box = page.evaluate(
        """([line, ch]) => {
            const el = document.querySelectorAll('.cm-content .cm-line')[line - 1];
            const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
            for (let n = walker.nextNode(); n; n = walker.nextNode()) {
                const i = n.textContent.indexOf(ch);
                if (i < 0) continue;
                const range = document.createRange();
                range.setStart(n, i);
                range.setEnd(n, i + 1);
                const r = range.getBoundingClientRect();
                return {x: r.left + r.width / 2, y: r.top + r.height / 2};
            }
            return null;
        }""",
        [line, char],
    )
    assert box is not None, f"no {char!r} on line {line}"
    page.mouse.move(box["x"], box["y"])


def test_hover_caret_comment_and_completion(page: Any) -> None:
    set_code(page, CODE)
    page.fill("#args", "(jnp.ones((4, 3)), jnp.ones((3, 2)))")
    page.keyboard.press("Control+Enter")
    assert wait_done(page, 120_000) == "ok", page.inner_text("#panel-errors")

    # `# ^?` under the `x` of `x @ w`: the matmul's shape, inline
    page.wait_for_selector("[data-testid=shape-inline]")
    assert page.inner_text("[data-testid=shape-inline]").strip() == "float32[4,2]"

    # hovering the `@`: the smallest span there is `x @ w`, not the tanh around it
    _hover_char(page, 2, "@")
    tooltip = page.wait_for_selector("[data-testid=shape-tooltip]")
    assert tooltip.inner_text().split() == ["float32[4,2]", "dot_general"]

    # completion of jax.numpy's names, with the signature
    page.mouse.move(0, 0)
    page.click("[data-testid=code]")
    page.keyboard.press("ControlOrMeta+End")
    page.keyboard.type("\n    jnp.su")
    page.wait_for_function(
        """() => [...document.querySelectorAll('.cm-tooltip-autocomplete li')]
            .some((li) => li.querySelector('.cm-completionLabel')?.textContent === 'sum')"""
    )
    detail = page.evaluate(
        """() => [...document.querySelectorAll('.cm-tooltip-autocomplete li')]
            .find((li) => li.querySelector('.cm-completionLabel')?.textContent === 'sum')
            .querySelector('.cm-completionDetail').textContent"""
    )
    assert detail.startswith("(a, axis=None"), detail
