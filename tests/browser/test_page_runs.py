"""The page's own part of a run (issue 26, issue 27's client side): one run frame per
key press or click, the WebSocket open before the first run, a shared link's results
painted from the page itself, the tab bar at 1400 px, an opt-in pane's one-click
re-run, and the warning on a run whose code wrote to jaxplay's output channel."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from .test_page import FINAL, set_code, show_tab, wait_done

CODE = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.sin(x) * 2.0)\n"


class Frames:
    """The WebSocket frames the page sends, by type."""

    def __init__(self, page: Any) -> None:
        self.sockets: list[Any] = []
        self.sent: list[dict[str, Any]] = []
        page.on("websocket", self._socket)

    def _socket(self, ws: Any) -> None:
        self.sockets.append(ws)
        ws.on("framesent", lambda payload: self.sent.append(json.loads(payload)))

    def runs(self) -> list[int]:
        return [m["seq"] for m in self.sent if m.get("type") == "run"]

    def cancels(self) -> int:
        return sum(1 for m in self.sent if m.get("type") == "cancel")


def fresh_page(
    browser: Any, server: Any, path: str = "/", width: int = 1440
) -> tuple[Any, Any, Frames]:
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=server.url)
    page = context.new_page()
    page.set_default_timeout(60_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    frames = Frames(page)
    page.goto(path)
    page.wait_for_selector("[data-testid=code]")
    page.errors = errors
    return context, page, frames


def ok(page: Any) -> bool:
    """The run on show ended ok (else the Errors pane says why, in the assertion)."""
    status = wait_done(page, 120_000)
    assert status == "ok", (status, page.inner_text(".progress"), page.inner_text("#panel-errors"))
    return True


def wait_runs(page: Any, n: int) -> None:
    page.wait_for_function("n => window.jaxplay?.runsSent() >= n", arg=n)


def test_one_run_per_key_press_or_click_wherever_the_focus_is(browser: Any, server: Any) -> None:
    context, page, frames = fresh_page(browser, server)
    try:
        # the WebSocket is open before any run: the first run pays no handshake
        for _ in range(100):
            if frames.sockets:
                break
            page.wait_for_timeout(50)
        assert len(frames.sockets) == 1
        assert frames.runs() == []
        set_code(page, CODE)
        page.fill("#args", "(jnp.ones(3),)")

        page.click("[data-testid=code]")
        page.keyboard.press("Control+Enter")  # in the editor (CodeMirror binds it too)
        assert ok(page)
        page.focus("#args")
        page.keyboard.press("Control+Enter")  # in another field
        wait_runs(page, 2)
        assert ok(page)
        page.click("#run")  # the button
        wait_runs(page, 3)
        assert ok(page)
        page.click("[data-testid=code]")
        page.keyboard.press("Shift+Enter")  # the editor's other run key
        wait_runs(page, 4)
        assert ok(page)
        page.wait_for_timeout(300)  # a second frame, if any, would be sent by now
        assert len(frames.runs()) == 4, frames.sent
        assert len(set(frames.runs())) == 4
        assert frames.cancels() == 0
        assert len(frames.sockets) == 1  # one connection, kept
        assert "sin" in page.evaluate("window.jaxplay.text('jaxpr')")
        assert page.errors == []
    finally:
        context.close()


def test_a_run_while_one_is_going_replaces_it_on_the_page(browser: Any, server: Any) -> None:
    """The second run's results are shown, never the first's; the first is not
    cancelled when it ends within the grace (the kept process is not retired)."""
    context, page, frames = fresh_page(browser, server)
    try:
        set_code(page, CODE.replace("2.0", "3.0"))
        page.fill("#args", "(jnp.ones(3),)")
        page.click("#run")
        page.click("#run")
        wait_runs(page, 2)
        assert ok(page)
        assert page.evaluate("window.jaxplay.runsSent()") == 2
        assert frames.cancels() == 0
        assert "3.0" in page.evaluate("window.jaxplay.text('jaxpr')")
    finally:
        context.close()


def _initial_page(
    browser: Any, server: Any, done_status: str, pending: list[str] | None = None
) -> tuple[Any, Any, Frames]:
    """A shared link's page as the server sends it with the answer embedded (the HTML
    made here: the client side of the contract, whatever the server decides)."""
    request = {"code": "def f(x):\n    return x * 2.0  # a < b && c > d\n", "args": "(1.0,)"}
    worker = {
        "backend": "cpu",
        "platform": "cpu",
        "device_kind": "cpu",
        "devices": 1,
        "jax_version": "0",
        "jaxlib_version": "0",
    }
    events = [
        {"type": "accepted", "run_id": "embedded", "worker": worker, "cached": True, "age_s": 5},
        {"type": "jaxpr", "text": "{ lambda ; a:f32[]. let b:f32[] = mul a 2.0:f32[] in (b,) }"},
        {"type": "hlo", "text": "HloModule embedded\n" + "// filler line\n" * 10_000},
        {"type": "done", "status": done_status, "ms": 3.0, "reason": ""},
    ]
    initial: dict[str, Any] = {"snippet_id": "embedded1", "request": request, "events": events}
    if pending is not None:
        initial["pending"] = pending

    # Added to the server's own page as its HTML is parsed, before the page's module
    # script runs (a document fulfilled by Playwright instead would be barred from the
    # loopback WebSocket by Chromium's local network access checks).
    text = (
        json.dumps(initial).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    )
    script = (
        "document.addEventListener('readystatechange', () => {"
        " if (document.readyState !== 'interactive') return;"
        " const tag = document.createElement('script');"
        " tag.type = 'application/json'; tag.id = 'jaxplay-initial';"
        f" tag.textContent = {json.dumps(text)};"
        " document.head.append(tag); });"
    )
    context = browser.new_context(viewport={"width": 1440, "height": 900}, base_url=server.url)
    context.add_init_script(script)
    page = context.new_page()
    page.set_default_timeout(30_000)
    frames = Frames(page)
    page.goto("/")
    return context, page, frames


def test_a_shared_links_results_sent_with_the_page_are_painted_without_a_run(
    browser: Any, server: Any
) -> None:
    context, page, frames = _initial_page(browser, server, "ok")
    try:
        page.wait_for_selector(f".run-status:is({FINAL})")
        assert page.get_attribute(".run-status", "data-status") == "ok"
        assert "mul a 2.0" in page.inner_text("[data-testid=out-jaxpr]")
        assert "a < b && c > d" in page.evaluate("window.jaxplay.code()")
        assert page.locator("[data-testid=cached]").count() == 1
        # painted from the page: no run was sent for it
        page.wait_for_timeout(300)
        assert frames.runs() == []
        assert page.evaluate("window.jaxplay.runsStarted()") == 1
        # the 10,000-line HLO was held back until its tab is shown, then all there
        show_tab(page, "hlo")
        assert page.evaluate("window.jaxplay.text('hlo')").count("\n") >= 10_000
        assert page.locator("[data-testid=run-banner]").is_hidden()
        # live as usual afterwards
        page.click("#run")
        assert ok(page)
        assert frames.runs() == [1]
    finally:
        context.close()


def test_a_new_links_run_is_sent_once_by_the_pages_first_script(browser: Any, server: Any) -> None:
    """A link never run: the server's first script in the page sent its run
    (backend/app/web/early_run.py) before the entry loaded; the page adopted it: one run
    frame for the visit, on one socket, and its jaxpr on show."""
    code = CODE.replace("2.0", f"{time.time_ns() % 10_000}.5")  # never run before
    body = {"code": code, "args": "(jnp.ones(3),)", "transforms": [{"name": "jit"}]}
    sid = httpx.post(f"{server.url}/api/v1/snippets", json=body).json()["id"]
    context = browser.new_context(viewport={"width": 1440, "height": 900}, base_url=server.url)
    try:
        # when the socket was made (the first script runs while the HTML is parsed, the
        # entry module only after), and whether the CSP refused any script
        context.add_init_script(
            """(() => {
              const Native = window.WebSocket;
              window.WebSocket = class extends Native {
                constructor(...a) { super(...a); window.__madeWhile ??= document.readyState; }
              };
              window.__refused = [];
              document.addEventListener("securitypolicyviolation",
                (e) => window.__refused.push(e.violatedDirective));
            })();"""
        )
        page = context.new_page()
        page.set_default_timeout(60_000)
        frames = Frames(page)
        response = page.goto(f"/s/{sid}")
        assert response is not None and 'id="jaxplay-early"' in response.text()
        assert page.evaluate("window.__madeWhile") == "loading"
        assert page.evaluate("window.__refused") == []
        assert ok(page)
        assert "sin" in page.evaluate("window.jaxplay.text('jaxpr')")
        page.wait_for_timeout(300)  # a second frame, if any, would be sent by now
        assert frames.runs() == [1], frames.sent
        assert frames.sent[0]["payload"] == {
            "code": code,
            "entry": "f",
            "args": "(jnp.ones(3),)",
            "transforms": [{"name": "jit"}],
            "compare": [],
            "backend": "auto",
            "devices": 1,
            "config": {},
        }
        assert len(frames.sockets) == 1 and frames.cancels() == 0
        assert page.evaluate("window.jaxplay.runsSent()") == 1
        # the page's next run follows on the adopted socket
        page.click("#run")
        wait_runs(page, 2)
        assert ok(page)
        assert frames.runs() == [1, 2] and len(frames.sockets) == 1
    finally:
        context.close()


def test_a_tampered_run_carries_a_clear_warning(browser: Any, server: Any) -> None:
    context, page, _ = _initial_page(browser, server, "tampered")
    try:
        banner = page.locator("[data-testid=run-banner]")
        banner.wait_for(state="visible")
        assert "wrote to jaxplay's output channel" in banner.inner_text()
        assert "may be forged" in banner.inner_text()
        assert page.get_attribute("[data-testid=run-banner]", "role") == "alert"
    finally:
        context.close()


def test_tab_bar_at_1400px_and_the_editor_wraps_long_lines(browser: Any, server: Any) -> None:
    context, page, _ = fresh_page(browser, server, width=1400)
    try:
        width = page.evaluate("innerWidth")
        bar = page.locator(".tabs").bounding_box()
        assert bar is not None and bar["x"] + bar["width"] <= width
        for tab in ("errors", "console", "jaxpr", "sharding", "remarks", "stablehlo"):
            show_tab(page, tab)
            page.wait_for_timeout(100)
            # the bar holds the group on show: measured again once another group shows
            bar = page.locator(".tabs").bounding_box()
            assert bar is not None and bar["x"] + bar["width"] <= width
            box = page.locator(f"#tab-{tab}").bounding_box()
            # within half a pixel: the scrolled bar puts a tab's edge on a subpixel
            inside = (
                box is not None
                and bar["x"] <= box["x"] + 0.5
                and box["x"] + box["width"] <= bar["x"] + bar["width"] + 0.5
            )
            assert inside, (tab, box, bar)
            assert page.get_attribute(f"#tab-{tab}", "aria-selected") == "true"
        # the keyboard too: End shows the last tab of the group on show, in sight
        page.focus("#tab-stablehlo")
        page.keyboard.press("End")
        assert page.get_attribute("#tab-graph", "aria-selected") == "true"
        box = page.locator("#tab-graph").bounding_box()
        assert box is not None and box["x"] + box["width"] <= bar["x"] + bar["width"] + 0.5
        # grouped (issue 35): a switcher of the groups, one group's tabs on show
        groups = page.eval_on_selector_all(
            "[data-testid=tab-groups] button", "els => els.map(e => e.dataset.group)"
        )
        assert groups == ["ir", "values", "how", "cost", "errors"]
        # a long comment wraps instead of being cut
        set_code(page, "# " + "a long header comment, " * 20 + "end\ndef f(x):\n    return x\n")
        scroller = page.locator(".editor-holder .cm-scroller")
        assert scroller.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
        assert "end" in page.locator(".editor-holder .cm-content").inner_text()
    finally:
        context.close()


def test_an_opt_in_pane_offers_one_click_to_run_again_with_its_output(
    browser: Any, server: Any
) -> None:
    context, page, frames = fresh_page(browser, server)
    try:
        set_code(page, CODE)
        page.fill("#args", "(jnp.ones(3),)")
        page.click("#run")
        assert ok(page)
        show_tab(page, "memory")
        offer = page.locator("[data-testid=rerun-with-memory]")
        offer.click()
        wait_runs(page, 2)
        assert ok(page)
        assert "memory" in frames.sent[-1]["payload"]["outputs"]
        assert page.is_checked("#out-memory")
        page.wait_for_selector("#panel-memory table, #panel-memory .memory")
        assert page.locator("[data-testid=rerun-offer]").is_hidden()
    finally:
        context.close()


def test_outputs_pending_in_the_embedded_answer_come_from_a_live_run(
    browser: Any, server: Any
) -> None:
    """``pending`` (outputs no cache keeps, such as timing): painted first, then the
    request runs as usual and brings them, the painted outputs kept meanwhile."""
    context, page, frames = _initial_page(browser, server, "ok", pending=["timing"])
    try:
        page.wait_for_function("() => window.jaxplay?.runsSent() === 1")
        assert page.evaluate("window.jaxplay.text('jaxpr')") is not None
        page.wait_for_selector(".run-status[data-status=running], .run-status[data-status=ok]")
        page.wait_for_function(
            "() => /Ready|Done/.test(document.querySelector('.run-status').textContent)"
        )
        show_tab(page, "timing")
        page.wait_for_selector("#panel-timing table.timing", timeout=120_000)
        assert len(frames.runs()) == 1
    finally:
        context.close()


def test_a_run_whose_code_writes_to_the_event_channel_is_marked(browser: Any, server: Any) -> None:
    """User code that writes a line of its own to jaxplay's event channel (as
    tests/server/test_hostile_events.py forges them): the run ends ``tampered`` and
    the page says so above the outputs."""
    context, page, _ = fresh_page(browser, server)
    try:
        set_code(
            page,
            "import json, os, sys\nimport jax.numpy as jnp\n\n"
            "os.write(sys.stdout._emitter._fd, json.dumps("
            "{'type': 'stdout', 'text': 'forged'}).encode() + b'\\n')\n\n"
            "def f(x):\n    return jnp.sum(x * 2.0)\n",
        )
        page.fill("#args", "(jnp.ones(3),)")
        page.click("#run")
        banner = page.locator("[data-testid=run-banner]")
        banner.wait_for(state="visible", timeout=120_000)
        assert "may be forged" in banner.inner_text()
        wait_done(page, 120_000)
        assert "may be forged" in page.inner_text(".progress")  # done's reason
    finally:
        context.close()
