"""The tour of JAX (issue 53) in a real browser: the whole tour walked in English and
in Chinese (the language the browser asks for), at a laptop's width and a phone's
390 px, each step's code in the real editor, its tab open, its lines marked, its run
ending as the step says, its own address, axe-core finding nothing; the try edit made
by its button; back and next keeping each step's place; the language switch; the
Learn button and leaving the tour."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from backend.app.tenancy.identity import SESSION_COOKIE
from tests.engine.tour_claims import steps
from tests.gates import missing_requirement

from .conftest import ROOT, Server
from .test_navigation import AXE, SIZES, no_sideways_scroll
from .test_page import set_code, wait_done

STEPS = steps()
EN = json.loads((ROOT / "frontend" / "src" / "i18n" / "en.json").read_text())
ZH = json.loads((ROOT / "frontend" / "src" / "i18n" / "zh.json").read_text())
LOCALES = {"en": "en-US", "zh": "zh-CN"}


def tour_page(
    browser: Any, server: Server, lang: str, size: str, visitor: list[dict[str, Any]]
) -> Iterator[Any]:
    """A page whose browser asks for ``lang`` at ``size`` (as the ``page`` fixture: JS
    errors and CSP refusals fail the test)."""
    width, height = SIZES[size]
    context = browser.new_context(
        viewport={"width": width, "height": height}, base_url=server.url, locale=LOCALES[lang]
    )
    if visitor:
        context.add_cookies(visitor)
    pg = context.new_page()
    pg.jaxplay_server_log = server.log
    pg.set_default_timeout(30_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on(
        "console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None
    )
    yield pg
    if not visitor:
        visitor.extend(c for c in context.cookies() if c["name"] == SESSION_COOKIE)
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def en_page(browser: Any, server: Server, returning_visitor: list[dict[str, Any]]) -> Iterator[Any]:
    yield from tour_page(browser, server, "en", "laptop", returning_visitor)


def runs_started(page: Any) -> int:
    return int(page.evaluate("() => window.jaxplay.runsStarted()"))


def next_run_ends(page: Any, before: int) -> str:
    """The status of the run after the ``before``-th (the run a click started)."""
    page.wait_for_function(
        "n => window.jaxplay !== undefined && window.jaxplay.runsStarted() > n", arg=before
    )
    return wait_done(page, 120_000)


def expected_status(claims: list[dict[str, Any]]) -> str:
    return "error" if any("error" in c for c in claims) else "ok"


def axe(page: Any, where: str) -> None:
    if not AXE.exists():
        missing_requirement("axe-core is not installed", "make setup (npm ci in frontend/)")
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.evaluate(AXE.read_text() + "\n;0")
    result = page.evaluate("async () => JSON.stringify((await axe.run(document)).violations)")
    # the bar: no serious violation (a minor one, the Timing table's empty
    # first header, is the timing pane's own and not the tour's)
    violations = [v for v in json.loads(result) if v["impact"] in ("serious", "critical")]
    summary = [(v["id"], v["impact"], [n["target"] for n in v["nodes"][:10]]) for v in violations]
    assert violations == [], (where, summary)


def check_step(page: Any, step: dict[str, Any], number: int, lang: str) -> None:
    text = step["text"][lang]
    panel = page.locator("[data-testid=tour]")
    assert panel.is_visible()
    assert page.inner_text("#tour-title") == text["title"]
    words = EN if lang == "en" else ZH
    assert page.inner_text("[data-testid=tour-count]") == words["tour.step"].replace(
        "{n}", str(number)
    ).replace("{total}", str(len(STEPS)))
    assert page.evaluate("() => location.pathname") == f"/tour/{number}"
    # the step's code in the real editor, its lines marked, its tab on show
    code = page.evaluate("() => window.jaxplay.code()")
    assert code == (ROOT / "tour" / step["file"]).read_text()
    marked = page.locator("[data-testid=code] .cm-tour-mark").count()
    assert marked == len(step["marks"]), (step["id"], marked)
    assert page.get_attribute(f"#tab-{step['tab']}", "aria-selected") == "true", step["id"]
    assert (
        page.locator(f"#tab-{step['tab']}")
        .inner_text()
        .strip()
        .startswith(words[f"tab.{step['tab']}"])
    )


def walk(page: Any, lang: str, apply: bool) -> None:
    before = 0  # a page loaded anew has started no run
    page.goto("/tour")
    page.wait_for_selector("[data-testid=tour]:not([hidden])")
    for number, step in enumerate(STEPS, start=1):
        status = next_run_ends(page, before)
        assert status == expected_status(step["claims"]["before"]), (step["id"], status)
        check_step(page, step, number, lang)
        no_sideways_scroll(page)
        axe(page, step["id"])
        if apply:
            before = runs_started(page)
            page.click("[data-testid=tour-apply]")
            status = next_run_ends(page, before)
            assert status == expected_status(step["claims"]["after"]), (
                step["id"],
                "after the try edit",
                status,
            )
            errors = [c["error"] for c in step["claims"]["after"] if "error" in c]
            if errors:  # the error the step says, in the Errors pane
                assert errors[0]["kind"] in page.inner_text("#panel-errors"), step["id"]
            elif "tab" in step["try"]:
                tab = step["try"]["tab"]
                assert page.get_attribute(f"#tab-{tab}", "aria-selected") == "true", (
                    step["id"],
                    tab,
                )
        before = runs_started(page)
        if number < len(STEPS):
            page.click("[data-testid=tour-next]")
    assert page.is_disabled("[data-testid=tour-next]")
    assert page.locator(".tour-end").is_visible()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("lang", "size", "apply"),
    [
        ("en", "laptop", True),
        ("zh", "phone", True),
        ("en", "phone", False),
        ("zh", "laptop", False),
    ],
)
def test_the_whole_tour_walked(
    browser: Any,
    server: Server,
    returning_visitor: list[dict[str, Any]],
    lang: str,
    size: str,
    apply: bool,
) -> None:
    for page in tour_page(browser, server, lang, size, returning_visitor):
        walk(page, lang, apply)
        # the page's own words are in the browser's language too
        words = EN if lang == "en" else ZH
        assert page.inner_text("#run") == words["button.run"]
        assert page.inner_text(".pipeline-a .pipeline-title").startswith(words["label.pipeline"])
        assert page.get_attribute("#compare", "title") == words["button.compare.title"]
        assert page.get_attribute("html", "lang") == ("en" if lang == "en" else "zh-Hans")


def test_back_and_next_keep_each_step_s_place(en_page: Any) -> None:
    page = en_page
    before = 0
    page.goto("/tour/2")
    assert next_run_ends(page, before) == "error"  # the sharp bit, as the step says
    page.click("[data-testid=code]")
    page.keyboard.press("ControlOrMeta+End")
    page.keyboard.insert_text("\n# my note\n")
    before = runs_started(page)
    page.click("[data-testid=tour-next]")
    next_run_ends(page, before)
    assert page.evaluate("() => location.pathname") == "/tour/3"
    assert "# my note" not in page.evaluate("() => window.jaxplay.code()")
    before = runs_started(page)
    page.click("[data-testid=tour-back]")
    next_run_ends(page, before)
    assert page.evaluate("() => location.pathname") == "/tour/2"
    assert "# my note" in page.evaluate("() => window.jaxplay.code()")
    # the browser's own back button walks the tour too
    before = runs_started(page)
    page.go_back()
    next_run_ends(page, before)
    assert page.evaluate("() => location.pathname") == "/tour/3"
    assert page.inner_text("#tour-title") == STEPS[2]["text"]["en"]["title"]
    # start over: the step's own code again
    before = runs_started(page)
    page.click("[data-testid=tour-back]")
    next_run_ends(page, before)
    assert "# my note" in page.evaluate("() => window.jaxplay.code()")
    before = runs_started(page)
    page.click("[data-testid=tour-reset]")
    next_run_ends(page, before)
    assert (
        page.evaluate("() => window.jaxplay.code()")
        == (ROOT / "tour" / STEPS[1]["file"]).read_text()
    )


def test_a_step_by_its_id_and_an_unknown_one(en_page: Any) -> None:
    page = en_page
    page.goto("/tour#vmap")
    page.wait_for_selector("[data-testid=tour]:not([hidden])")
    number = [s["id"] for s in STEPS].index("vmap") + 1
    assert page.evaluate("() => location.pathname") == f"/tour/{number}"
    page.goto("/tour/grad")
    page.wait_for_selector("[data-testid=tour]:not([hidden])")
    assert (
        page.inner_text("#tour-title")
        == STEPS[[s["id"] for s in STEPS].index("grad")]["text"]["en"]["title"]
    )
    page.goto("/tour/99")
    page.wait_for_selector("[data-testid=tour]:not([hidden])")
    assert page.inner_text("#tour-title") == STEPS[0]["text"]["en"]["title"]
    assert "99" in page.inner_text("[data-testid=tour-note]")


def test_the_language_switch_and_the_sharp_bit_hint(en_page: Any) -> None:
    page = en_page
    before = 0
    page.goto("/tour/2")
    assert next_run_ends(page, before) == "error"
    assert EN["hint.TracerBoolConversionError"].split("`")[0] in page.inner_text("#panel-errors")
    page.select_option("[data-testid=language]", "zh")
    assert page.inner_text("#tour-title") == STEPS[1]["text"]["zh"]["title"]
    assert page.inner_text("#run") == ZH["button.run"]
    assert page.locator("#tab-errors").inner_text().strip().startswith(ZH["tab.errors"])
    # the next run's hint is the page's language's
    before = runs_started(page)
    page.click("#run")
    assert next_run_ends(page, before) == "error"
    assert ZH["hint.TracerBoolConversionError"].split("`")[0] in page.inner_text("#panel-errors")
    assert ZH["errors.line"].replace("{n}", "5") in page.inner_text("#panel-errors")
    # and at the line in the editor
    assert ZH["hint.TracerBoolConversionError"].split("`")[0] in page.inner_text(".cm-error-hint")
    # kept for the next visit
    page.reload()
    page.wait_for_selector("[data-testid=tour]:not([hidden])")
    assert page.inner_text("#tour-title") == STEPS[1]["text"]["zh"]["title"]
    page.select_option("[data-testid=language]", "en")
    assert page.inner_text("#run") == EN["button.run"]


def test_learn_opens_the_tour_and_closing_it_brings_the_page_back(en_page: Any) -> None:
    page = en_page
    page.goto("/")
    page.wait_for_selector("[data-testid=code]")
    code = page.evaluate("() => window.jaxplay.code()")
    assert page.locator("[data-testid=tour]").is_hidden()
    before = runs_started(page)
    page.click("[data-testid=learn]")
    next_run_ends(page, before)
    assert page.evaluate("() => location.pathname").startswith("/tour/")
    assert page.evaluate("() => window.jaxplay.code()") != code
    page.click("[data-testid=tour-close]")
    assert page.locator("[data-testid=tour]").is_hidden()
    assert page.evaluate("() => location.pathname") == "/"
    assert page.evaluate("() => window.jaxplay.code()") == code
    assert page.locator("[data-testid=code] .cm-tour-mark").count() == 0


def test_the_tour_leaves_the_reader_s_autosave_alone(en_page: Any) -> None:
    page = en_page
    page.goto("/")
    page.wait_for_selector("[data-testid=code]")
    mine = "import jax.numpy as jnp\n\n\ndef f(x):\n    return x * 3  # mine\n"
    set_code(page, mine)
    page.wait_for_timeout(800)  # past the autosave's delay (app/store.ts SAVE_AFTER_MS)
    page.goto("/tour/4")
    next_run_ends(page, 0)
    page.wait_for_timeout(800)
    # the tab closed on the tour: the next visit finds the reader's own code
    page.goto("/")
    page.wait_for_selector("[data-testid=code]")
    assert page.evaluate("() => window.jaxplay.code()") == mine
