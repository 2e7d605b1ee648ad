"""Issue 33, item 8: a shared request with ``checks`` (``nans``), answered from the
cache to a later visitor, ends Done — its follow-up run (the timings) asks only for
what it refreshes, so the gate has nothing to refuse, and the page never says
"what it shows may be forged" beside "cached". A real browser, server, pool and jail."""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.live_server import pristine_confirmed, wait_for_confirmed_answer

from .conftest import Server
from .test_page import set_code, show_tab, wait_done

CODE = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.sqrt(x) * 2.0)\n"


def visit(browser: Any, server: Server, code: str) -> Any:
    """A new visitor (a context of its own: its own session) runs ``code`` with the
    ``nans`` check, as the page sends it (timings among its outputs)."""
    context = browser.new_context(viewport={"width": 1300, "height": 850}, base_url=server.url)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto("/")
    pg.wait_for_selector("[data-testid=code]")
    set_code(pg, code)
    pg.fill("#args", "jnp.arange(3.0)")
    pg.click("[data-testid=compute] summary")  # What to compute
    pg.check("#check-nans")
    pg.keyboard.press("Escape")
    pg.click("#run")
    status = wait_done(pg, 180_000)
    assert status == "ok", (status, pg.inner_text("#panel-errors"))
    assert not errors, errors
    return context, pg


def test_a_second_visitor_s_cached_checks_run_ends_done(browser: Any, server: Server) -> None:
    code = CODE + f"# {uuid.uuid4().hex}\n"  # nobody else's entry
    contexts = []
    try:
        author, pg = visit(browser, server, code)  # the candidate
        contexts.append(author)
        assert pg.locator("[data-testid=cached]").count() == 0
        confirmed = pristine_confirmed(server)
        second, pg = visit(browser, server, code)  # asks for the pristine run
        contexts.append(second)
        # its link's page carries the answer once a pristine run confirmed this very
        # request (the counter alone moves for an earlier test's pristine run too)
        pg.click("#share")
        link = pg.locator("[data-testid=share-link]").input_value()
        wait_for_confirmed_answer(server, link.rsplit("/", 1)[1].split("#")[0])
        assert pristine_confirmed(server) >= confirmed + 1
        third, pg = visit(browser, server, code)  # answered from the cache
        contexts.append(third)
        assert pg.locator("[data-testid=cached]").count() == 1
        assert pg.get_attribute(".run-status", "data-status") == "ok"
        page_text = pg.inner_text("body")
        assert "may be forged" not in page_text
        errors = pg.locator("#panel-errors").inner_text().strip()
        assert "forged" not in errors and "execute" not in errors, errors
        # the checks' result came from the cache, and the timings were measured fresh
        show_tab(pg, "checks")
        nans = pg.wait_for_selector("#panel-checks li[data-check=nans]")
        assert nans.get_attribute("data-status") == "ok"
    finally:
        for context in contexts:
            context.close()
