"""A run that runs out of time says in which stage and how far it got, and Errors offers
one click to run it again with the server's longest limit (docs/api.md, "Big
programs"): the page's own requests carry no ``timeout_s`` until then, so without it a
user could not give a big program more time from the page. The limit is kept: the
runs after have it, and a link made then is stored with it (its page runs with it)."""

from __future__ import annotations

from typing import Any

import httpx

from .conftest import Server
from .test_page import set_code, wait_done

# exec outlasts the default 20 s, and not the server's longest (60 s); a scalar for
# the default pipeline's grad whatever args the page proposes
SLOW = "import time\ntime.sleep(22)\n\ndef f(x):\n    return (x * 2).sum()\n"


def test_a_run_out_of_time_offers_a_longer_run_that_finishes(page: Any, server: Server) -> None:
    set_code(page, SLOW)
    page.keyboard.press("ControlOrMeta+Enter")
    assert wait_done(page, timeout_ms=90_000) == "timeout"
    card = page.locator(".error-card.problem")
    said = card.inner_text()
    assert "reached in the exec stage" in said and "stages done" in said
    assert "timeout_s" not in said  # a REST field: the page's way is the button
    button = page.locator("[data-testid=run-longer]")
    assert button.inner_text() == "Run again with up to 60 s"
    sent = page.evaluate("() => window.jaxplay.runsSent()")
    button.click()
    page.wait_for_function(f"() => window.jaxplay.runsSent() > {sent}")
    assert wait_done(page, timeout_ms=120_000) == "ok", page.inner_text("#panel-errors")
    assert page.locator("[data-testid=run-longer]").count() == 0
    # a link made now keeps the limit the program needed
    page.click("#share")
    url = page.locator("[data-testid=share-link]").input_value()
    snippet = url.rsplit("/", 1)[1].split("#")[0]
    stored = httpx.get(server.url + "/api/v1/snippets/" + snippet).json()
    assert stored["timeout_s"] == 60
