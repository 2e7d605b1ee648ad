"""The page for a newcomer (issue 15): args that follow the function, outputs first,
a count mismatch said in words with its fix, dotted entries."""

from __future__ import annotations

from typing import Any

from .test_page import (
    add_step,
    clear_pipeline,
    output_text,
    set_code,
    set_field,
    show_tab,
    wait_done,
)


def selected_tab(page: Any) -> str:
    return str(page.get_attribute("[role=tab][aria-selected=true]", "data-tab"))


def test_newcomer_sees_the_jaxpr_on_the_first_ctrl_enter(page: Any) -> None:
    # The example's args (for f(w), examples/grad_of_loss.py) are in the args box; the
    # newcomer replaces the code and presses Ctrl+Enter at once, without touching them.
    assert page.input_value("#args") == "(jnp.ones((3,)),)"
    set_code(page, "def f(x): return jnp.sum(jnp.cos(x) ** 3)")
    page.keyboard.press("Control+Enter")
    assert wait_done(page) == "ok", page.inner_text("#panel-errors")
    # the example's f(w) took a vector too: the same args, so no note to make
    assert page.input_value("#args") == "(jnp.ones((3,)),)"
    assert selected_tab(page) == "jaxpr"
    assert page.locator("[data-testid=out-jaxpr]").is_visible()
    assert "cos" in output_text(page, "jaxpr")
    # the args stay editable, and once edited they are the user's
    set_field(page, "#args", "(jnp.arange(4.0),)")
    set_code(page, "def f(x, y): return jnp.sum(jnp.cos(x) ** 3)")
    page.wait_for_timeout(600)
    assert page.input_value("#args") == "(jnp.arange(4.0),)"


def test_the_args_follow_while_typing(page: Any) -> None:
    set_code(page, "def f(x, y, n=3):\n    return jnp.sum(x * y) * n\n")
    page.wait_for_function("() => document.querySelector('#args').value.endsWith(', 3)')")
    assert page.input_value("#args") == "(jnp.ones((3,)), jnp.ones((3,)), 3)"
    set_code(page, 'def f(x: Float[Array, "2 4"]):\n    return x\n')
    page.wait_for_function("() => document.querySelector('#args').value.includes('(2, 4)')")
    assert page.input_value("#args") == "(jnp.ones((2, 4)),)"


def test_the_sharp_bit_shows_tracer_bool_conversion_first(page: Any) -> None:
    set_code(page, "def f(x):\n    if x > 0:\n        return x\n    return -x\n")
    page.keyboard.press("Control+Enter")
    assert wait_done(page) == "error"
    kinds = [
        page.locator(".error-card[data-kind]").nth(i).get_attribute("data-kind")
        for i in range(page.locator(".error-card[data-kind]").count())
    ]
    assert kinds == ["TracerBoolConversionError"], kinds
    assert page.locator("[data-testid=args-fix]").count() == 0
    assert page.locator("[data-testid=code] .cm-error-line").get_attribute("data-error-line") == "2"


def test_a_count_mismatch_names_the_args_box_and_fixes_in_one_click(page: Any) -> None:
    set_code(page, "def f(x):\n    return jnp.sum(jnp.sin(x))\n")
    set_field(page, "#args", "(jnp.array(1.0), 2.0)")  # by hand: the page leaves it alone
    page.keyboard.press("Control+Enter")
    assert wait_done(page) == "error"
    assert selected_tab(page) == "errors"
    fix = page.locator("[data-testid=args-fix]")
    assert "args" in fix.inner_text() and "f(x)" in fix.inner_text()
    assert "takes 1 positional argument but 2 were given" in fix.inner_text()
    assert page.get_attribute("#args", "aria-invalid") == "true"
    page.click("[data-testid=fill-args]")
    assert wait_done(page) == "ok"
    assert page.input_value("#args") == "(jnp.ones((3,)),)"
    assert page.get_attribute("#args", "aria-invalid") is None
    assert selected_tab(page) == "jaxpr"


def test_a_fixed_error_shows_outputs_not_an_empty_errors_tab(page: Any) -> None:
    page.select_option("#examples", "sharp-bit")
    assert wait_done(page) == "error"
    assert selected_tab(page) == "errors"
    set_code(page, "def f(x):\n    return jnp.where(x.sum() > 0, x * 2, -x)\n")
    page.keyboard.press("Control+Enter")
    assert wait_done(page) == "ok"
    assert selected_tab(page) == "jaxpr"
    assert "No errors." not in page.inner_text("#panel-jaxpr")
    # a tab the user picked is kept for the next run
    show_tab(page, "value")
    page.keyboard.press("Control+Enter")
    assert wait_done(page) == "ok"
    assert selected_tab(page) == "value"
    assert "float32[5]" in page.inner_text("#panel-value")  # the example's jnp.arange(-2.0, 3.0)


def test_a_dotted_entry_runs_a_library_function(page: Any) -> None:
    set_code(page, "from jax import random\n")
    set_field(page, "#entry", "jax.nn.gelu")
    set_field(page, "#args", "jnp.linspace(-1.0, 1.0, 5)")
    clear_pipeline(page)
    add_step(page, "jit")
    assert page.inner_text("[data-testid=summary-A]") == "jit(jax.nn.gelu)"
    page.click("#run")
    assert wait_done(page) == "ok", page.inner_text("#panel-errors")
    assert "tanh" in output_text(page, "jaxpr")
    set_field(page, "#entry", "jnp.linalg.solve")
    set_field(page, "#args", "(jnp.eye(3) * 2.0, jnp.ones(3))")
    page.click("#run")
    assert wait_done(page) == "ok", page.inner_text("#panel-errors")
    show_tab(page, "value")
    assert "0.5" in page.inner_text("#panel-value")


def test_the_embed_view_sits_in_an_iframe_read_only_with_its_outputs(
    page: Any, server: Any
) -> None:
    import httpx

    code = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.sin(x) ** 2)\n"
    request = {"code": code, "args": "jnp.arange(3.0)", "transforms": [{"name": "grad"}]}
    sid = httpx.post(server.url + "/api/v1/snippets", json=request).json()["id"]
    # a tutorial page on this site (frame-ancestors 'self' by default) frames the view
    host = f"{server.url}/tutorial.html"
    page.route(
        host,
        lambda route: route.fulfill(
            content_type="text/html",
            body=f'<!doctype html><h1>A tutorial</h1><iframe src="/e/{sid}" width="860" '
            'height="560" title="jaxplay"></iframe>',
        ),
    )
    page.goto(host)
    frame = page.frame_locator("iframe")
    frame.locator(".run-status[data-status=ok]").wait_for(timeout=60_000)
    assert frame.locator("body.embed").count() == 1
    assert frame.locator("[data-testid=embed-pipeline]").inner_text() == "grad(f)"
    link = frame.locator("[data-testid=open-in-jaxplay]")
    assert link.get_attribute("href") == f"/s/{sid}" and link.get_attribute("target") == "_blank"
    assert frame.locator("#run").is_hidden() and frame.locator(".pipelines").is_hidden()
    assert "cos" in frame.locator("[data-testid=out-jaxpr]").inner_text()
    # read-only: typing changes nothing
    frame.locator("[data-testid=code]").click()
    page.keyboard.type("x = 1\n")
    inner = page.frames[1]
    assert inner.evaluate("window.jaxplay.code()") == code
    assert frame.locator("#args").get_attribute("readonly") is not None
    # the reader's own autosave is left alone
    saved = inner.evaluate("localStorage.getItem('jaxplay:state:v1')") or ""
    assert "jnp.sin(x) ** 2" not in saved


def test_a_run_whose_worker_dies_says_why_in_errors(page: Any) -> None:
    # the worker process itself goes away: the run's `done` carries the only reason,
    # and the page says it in Errors rather than leave an empty output tab on show
    set_code(page, "import os\n\ndef f(w):\n    os._exit(0)\n")
    page.keyboard.press("Control+Enter")
    status = wait_done(page)
    assert status in ("error", "killed"), status
    reason = page.inner_text(".run-status")
    assert selected_tab(page) == "errors", reason
    assert "exited" in page.inner_text("#panel-errors"), reason
