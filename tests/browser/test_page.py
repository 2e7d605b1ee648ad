"""The playground page in a real browser against the real server and pool."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import httpx

from sandbox.environments.libraries import installed_here
from tests.support.live_server import pristine_confirmed, wait_for_confirmed_answer

from .conftest import ROOT, Server

FINAL = "[data-status=ok],[data-status=error],[data-status=cancelled],[data-status=timeout],[data-status=killed]"


def set_code(page: Any, code: str) -> None:
    page.click("[data-testid=code]")
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(code)


def set_field(page: Any, selector: str, value: str) -> None:
    page.fill(selector, value)


def clear_pipeline(page: Any, name: str = "A") -> None:
    remove = page.locator(f"[data-testid=pipeline-{name}] button[aria-label^=Remove]")
    while remove.count():
        remove.first.click()


def add_step(page: Any, transform: str, name: str = "A") -> None:
    page.select_option(f"[data-testid=add-{name}]", transform)


def wait_done(page: Any, timeout_ms: int = 60_000) -> str:
    try:
        page.wait_for_selector(f".run-status:is({FINAL})", timeout=timeout_ms)
    except Exception as exc:  # a run that never ended: the failure says where it stopped
        raise AssertionError(f"the run did not end: {stuck_run_report(page)}") from exc
    return str(page.get_attribute(".run-status", "data-status"))


def stuck_run_report(page: Any) -> str:
    """What the page shows, how many runs it sent, the server's pool figures and the
    end of its log: for a run that never ended (a CI failure must say where it stopped)."""
    progress = page.inner_text(".progress")
    sent = page.evaluate("() => window.jaxplay.runsSent()")
    metrics = page.request.get("/metrics")
    figures = [
        line
        for line in metrics.text().splitlines()
        if line.startswith(("jaxplay_pool", "jaxplay_runs_in_flight", "jaxplay_queue_length"))
    ]
    log = getattr(page, "jaxplay_server_log", None)
    tail = log.read_text(errors="replace").splitlines()[-20:] if log is not None else []
    head = f"progress {progress!r}; runs sent {sent}; /metrics {metrics.status}"
    return "\n".join([head, *figures, "server log:", *tail])


def show_tab(page: Any, tab: str) -> int:
    """Shows output tab ``tab`` as a user would: one click where its group's tabs are
    on show, two where they are not (the group switcher's button first; it shows the
    group's last tab, which may be this one). Returns the clicks it took."""
    clicks = 0
    if not page.locator(f"#tab-{tab}").is_visible():
        group = page.get_attribute(f"#tab-{tab}", "data-group")
        page.click(f"[data-testid=tab-groups] button[data-group={group}]")
        clicks += 1
    if page.get_attribute(f"#tab-{tab}", "aria-selected") != "true":
        page.click(f"#tab-{tab}")
        clicks += 1
    return clicks


def output_text(page: Any, kind: str, pipeline: str = "main") -> str:
    """The whole text of an output pane (CodeMirror draws only the visible lines)."""
    return str(page.evaluate("([k, p]) => window.jaxplay.text(k, p)", [kind, pipeline]))


def test_write_code_build_a_pipeline_and_see_every_output(page: Any) -> None:
    set_code(
        page,
        "import jax.numpy as jnp\n\ndef f(x):\n    y = jnp.sin(x) ** 2\n    return jnp.sum(y)\n",
    )
    set_field(page, "#args", "jnp.arange(3.0)")
    clear_pipeline(page)
    add_step(page, "grad")
    add_step(page, "jit")
    assert page.inner_text("[data-testid=summary-A]") == "jit(grad(f))"
    page.click("[data-testid=pipeline-A] button[aria-label='Move jit earlier']")
    assert page.inner_text("[data-testid=summary-A]") == "grad(jit(f))"
    page.click("[data-testid=pipeline-A] button[aria-label='Move grad earlier']")
    assert page.inner_text("[data-testid=summary-A]") == "jit(grad(f))"
    add_step(page, "vmap")
    page.click("[data-testid=pipeline-A] button[aria-label='Remove vmap']")
    page.fill("[data-testid=pipeline-A] [data-option=static_argnums]", "(0")  # does not parse
    page.click("#run")
    assert "static_argnums" in page.inner_text("#panel-errors")
    page.fill("[data-testid=pipeline-A] [data-option=static_argnums]", "")
    page.click("[data-testid=code]")
    page.keyboard.press("Control+Enter")  # runs from the editor
    assert wait_done(page) == "ok"

    jaxpr = output_text(page, "jaxpr")
    assert "sin" in jaxpr and "cos" in jaxpr and "jit" in jaxpr
    # stage progress: each stage that ran has its chip, with its time
    for stage in ("exec", "lower", "compile", "timing"):
        assert re.search(
            r"\d", page.inner_text(f".stage-row[data-pipeline=main] [data-stage={stage}]")
        )

    show_tab(page, "stablehlo")
    assert "stablehlo.sine" in output_text(page, "stablehlo")
    show_tab(page, "hlo")
    assert "HloModule" in output_text(page, "hlo")

    show_tab(page, "value")
    value = page.inner_text("#panel-value")
    assert "float32[3]" in value and "Array(" in value
    # the gradient of sum(sin(x)^2) is sin(2x): at x = 1, 0.909297
    assert "0.909297" in value

    show_tab(page, "cost")
    assert "FLOPs" in page.inner_text("#panel-cost")

    show_tab(page, "timing")
    page.wait_for_selector("#panel-timing svg.chart")
    timing = page.inner_text("#panel-timing table.timing")
    assert "f (eager)" in timing and "jit(grad(f))" in timing

    # the tabs are a keyboard-operable tablist: the arrows, Home and End move among the
    # tabs of the group on show (Cost, Timing, Memory, Profile)
    page.focus("#tab-timing")
    after = page.evaluate("document.querySelector('#tab-timing').nextElementSibling.id")
    page.keyboard.press("ArrowRight")
    assert page.get_attribute(f"#{after}", "aria-selected") == "true"
    page.keyboard.press("End")
    assert page.get_attribute("#tab-profile", "aria-selected") == "true"


def test_an_error_shows_its_hint_at_its_line(page: Any) -> None:
    page.select_option("#examples", "sharp-bit")
    assert wait_done(page) == "error"
    marked = page.locator("[data-testid=code] .cm-error-line")
    assert marked.count() == 1
    assert marked.get_attribute("data-error-line") == "16"  # as the CLI reports it
    assert "if x.sum() > 0" in marked.inner_text()
    hint = page.locator("[data-testid=code] .cm-error-hint")
    assert "TracerBoolConversionError" in hint.inner_text() and "jnp.where" in hint.inner_text()
    # the errors pane: hint, JAX's page for it, a button to the line
    card = page.locator(".error-card[data-kind=TracerBoolConversionError]")
    assert "lax.cond" in card.locator(".error-hint").inner_text()
    link = card.locator(".error-doc a")
    assert link.get_attribute("href", timeout=1000).startswith("https://docs.jax.dev/")
    assert card.locator(".error-line").inner_text() == "line 16"
    assert page.get_attribute("#tab-errors", "aria-selected") == "true"
    assert page.locator(".stage-row [data-stage=trace].failed").count() == 1


def test_share_link_round_trip(page: Any, browser: Any, server: Server) -> None:
    set_code(page, "import jax.numpy as jnp\n\ndef f(x, y):\n    return jnp.sum(jnp.tanh(x * y))\n")
    set_field(page, "#args", "(jnp.ones(4), 2.0)")
    clear_pipeline(page)
    add_step(page, "grad")
    page.fill("[data-testid=pipeline-A] [data-option=argnums]", "0, 1")
    add_step(page, "jit")
    page.keyboard.press("Control+Enter")
    assert wait_done(page) == "ok"
    confirmed = pristine_confirmed(server)
    page.click("#share")
    link = page.locator("[data-testid=share-link]")
    url = link.input_value()
    # the link names the output on show (#out=…: it opens there)
    assert re.fullmatch(re.escape(server.url) + r"/s/[A-Za-z0-9_-]+#out=[a-z_]+", url), url
    assert page.evaluate("location.pathname + location.hash") == url.removeprefix(server.url)
    assert page.evaluate("navigator.clipboard.readText()") == url
    # the snippet is stored as the request
    snippet = url.rsplit("/", 1)[1].split("#")[0]
    stored = httpx.get(server.url + "/api/v1/snippets/" + snippet).json()
    assert stored["transforms"] == [{"name": "grad", "argnums": [0, 1]}, {"name": "jit"}]

    # Two visitors, each a session of their own. Sharing asked the server for the
    # pristine run of the author's answer (no other tenant's run is evidence); once it
    # confirmed it, both are shown the confirmed answer, embedded in the page. (A
    # visitor who came before it started would run the request at once: a request
    # never waits for a pristine run still in line.)
    wait_for_confirmed_answer(server, snippet)
    assert pristine_confirmed(server) >= confirmed + 1
    for visitor in ("first", "second"):
        other = browser.new_context(viewport={"width": 1200, "height": 800})
        try:
            pg = other.new_page()
            pg.goto(url)
            # restored at once: code, args, pipeline; and its results arrive by themselves
            pg.wait_for_selector("[data-testid=code]")
            assert "jnp.tanh(x * y)" in pg.evaluate("window.jaxplay.code()")
            assert pg.input_value("#args") == "(jnp.ones(4), 2.0)"
            assert pg.inner_text("[data-testid=summary-A]") == "jit(grad(f, argnums=(0, 1)))"
            assert wait_done(pg) == "ok"
            assert "tanh" in output_text(pg, "jaxpr")
            note = pg.locator("[data-testid=cached]")
            assert note.count() == 1, visitor
        finally:
            other.close()


def test_compare_mode_diffs_jaxprs_and_times_both(page: Any) -> None:
    page.select_option("#examples", "jacfwd-jacrev")
    assert page.get_attribute("#compare", "aria-pressed") == "true"
    assert page.inner_text("[data-testid=summary-B]") == "jit(jacrev(f))"
    assert wait_done(page) == "ok"
    views = page.locator("#panel-jaxpr [data-testid=out-jaxpr]")
    assert views.count() == 2
    assert "A: jit(jacfwd(f))" in page.inner_text("#panel-jaxpr .merge-head")
    a, b = output_text(page, "jaxpr", "main"), output_text(page, "jaxpr", "0")
    assert (
        a != b and "reverse=True" in b and "reverse=True" not in a
    )  # reverse mode transposes cumsum
    assert page.locator("#panel-jaxpr .cm-changedLine").count() > 0  # the diff
    show_tab(page, "timing")
    timing = page.inner_text("#panel-timing table.timing")
    assert "jit(jacfwd(f))" in timing and "jit(jacrev(f))" in timing
    show_tab(page, "value")
    assert "identical bytes" in page.inner_text("#panel-value") or "max |A−B|" in page.inner_text(
        "#panel-value"
    )
    # turning compare off goes back to one pipeline
    page.click("#compare")
    assert page.locator("[data-testid=pipeline-B]").is_hidden()


def test_hover_links_source_and_output_lines(page: Any) -> None:
    page.select_option("#examples", "grad-loss")
    assert wait_done(page) == "ok"
    editor = page.locator("[data-testid=code]")
    for kind in ("jaxpr", "stablehlo", "hlo"):
        show_tab(page, kind)
        out = page.locator(f"[data-testid=out-{kind}]")
        banded = out.locator(".cm-line.cm-band")
        assert banded.count() > 0, kind
        line = banded.first
        src = line.get_attribute("data-src-line")
        # the code line shares the output line's colour band...
        band = re.search(r"cm-band-\d", line.get_attribute("class") or "").group(0)  # type: ignore[union-attr]
        code_line = editor.locator(f".cm-line[data-src-line='{src}']")
        assert band in (code_line.get_attribute("class") or ""), kind
        # ...and hovering the output line highlights it
        line.hover()
        page.wait_for_selector(f"[data-testid=code] .cm-line.cm-linked[data-src-line='{src}']")
        # hovering a code line highlights every output line it produced
        page.mouse.move(0, 0)
        code_line.hover()
        page.wait_for_selector(
            f"[data-testid=out-{kind}] .cm-line.cm-linked[data-src-line='{src}']"
        )
        linked = out.locator(".cm-line.cm-linked")
        assert linked.count() == out.locator(f".cm-line[data-src-line='{src}']").count()
        page.mouse.move(0, 0)


def test_cancel_stops_a_long_run(page: Any) -> None:
    set_code(page, "import time\n\ndef f(x):\n    return x\n\ntime.sleep(30)\n")
    page.click("#run")
    page.wait_for_selector(".run-status:is([data-status=running],[data-status=queued])")
    page.wait_for_timeout(500)
    page.click("#cancel")
    assert wait_done(page, timeout_ms=15_000) == "cancelled"
    assert page.is_disabled("#cancel")


def test_output_is_text_never_html_and_marked_trace_time(page: Any) -> None:
    set_code(
        page,
        "import jax\n\ndef f(x):\n    print('<b id=injected>bold</b><img src=x onerror=alert(1)>')\n"
        "    jax.debug.print('run {x}', x=x)\n    return x * 2\n",
    )
    set_field(page, "#args", "1.0")
    clear_pipeline(page)
    add_step(page, "jit")
    page.click("#run")
    assert wait_done(page) == "ok"
    show_tab(page, "console")
    console = page.locator("#panel-console")
    # the pane is drawn once its module has loaded (on a loaded machine, after the click)
    console.locator(".console-entry").first.wait_for(timeout=15_000)
    assert "<b id=injected>bold</b>" in console.inner_text()
    assert page.locator("#injected").count() == 0 and console.locator("img").count() == 0
    assert console.locator(".console-entry[data-stage=trace]").count() >= 1
    assert (
        "trace time" in console.locator(".console-entry[data-stage=trace] .when").first.inner_text()
    )
    assert (
        "run time" in console.locator(".console-entry[data-stage=execute] .when").first.inner_text()
    )


def test_autosave_restores_the_state_after_a_reload(page: Any) -> None:
    set_code(page, "def f(x):\n    return x + 41\n")
    set_field(page, "#args", "1.0")
    clear_pipeline(page)
    add_step(page, "vmap")
    page.fill("[data-testid=pipeline-A] [data-option=in_axes]", "(None,)")
    page.wait_for_timeout(500)  # autosave is debounced
    page.reload()
    page.wait_for_selector("[data-testid=code]")
    assert "x + 41" in page.evaluate("window.jaxplay.code()")
    assert page.input_value("#args") == "1.0"
    assert page.input_value("[data-testid=pipeline-A] [data-option=in_axes]") == "(None,)"


def test_narrow_screen_and_dark_theme(page: Any) -> None:
    page.set_viewport_size({"width": 420, "height": 860})
    page.click("#theme")
    theme = page.evaluate("document.documentElement.dataset.theme")
    page.click("#run")
    assert wait_done(page) == "ok"
    show_tab(page, "value")
    # one column: the editor above the outputs, nothing wider than the screen
    assert page.evaluate("document.documentElement.scrollWidth") <= 430
    editor_box = page.locator(".left").bounding_box()
    panels_box = page.locator(".panels").bounding_box()
    assert editor_box["y"] < panels_box["y"]
    page.click("#theme")
    assert page.evaluate("document.documentElement.dataset.theme") != theme


def screenshots_dir(tmp_path: Path) -> Path:
    """Where the docs' pictures go: docs/screenshots with JAXPLAY_SCREENSHOTS=1 (make
    screenshots), else a temporary folder (the same steps run as a test)."""
    out = (
        ROOT / "docs" / "screenshots" if os.environ.get("JAXPLAY_SCREENSHOTS") == "1" else tmp_path
    )
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_screenshots(page: Any, tmp_path: Path) -> None:
    """The README's pictures; written to docs/screenshots with JAXPLAY_SCREENSHOTS=1."""
    out = screenshots_dir(tmp_path)
    page.select_option("#examples", "grad-loss")
    assert wait_done(page) == "ok"
    page.locator("[data-testid=out-jaxpr] .cm-line[data-src-line='21']").first.hover()
    page.screenshot(path=str(out / "jaxpr-linked.png"))
    page.mouse.move(0, 0)
    show_tab(page, "graph")
    page.wait_for_selector("#panel-graph g.gnode[data-op=tanh]")
    page.locator("#panel-graph g.gnode[data-op=tanh]").first.hover()
    page.screenshot(path=str(out / "graph.png"))
    page.mouse.move(0, 0)
    show_tab(page, "timing")
    page.screenshot(path=str(out / "timing.png"))
    page.select_option("#presets", "jacfwd-jacrev")
    assert wait_done(page) == "ok"
    show_tab(page, "jaxpr")
    page.screenshot(path=str(out / "compare.png"))
    show_tab(page, "graph")
    page.click("[data-graph-source=hlo]")
    page.wait_for_selector("#panel-graph .graph-col[data-pipeline='0'] g.gnode[data-op=fusion]")
    page.screenshot(path=str(out / "graph-hlo-compare.png"))
    page.click("[data-graph-source=jaxpr]")
    page.select_option("#examples", "sharp-bit")
    assert wait_done(page) == "error"
    page.screenshot(path=str(out / "error.png"))
    page.click("#theme")
    page.select_option("#examples", "per-example")
    assert wait_done(page) == "ok"
    show_tab(page, "stablehlo")
    page.locator("[data-testid=code] .cm-line[data-src-line='15']").hover()
    page.screenshot(path=str(out / "dark-stablehlo.png"))
    page.mouse.move(0, 0)
    page.click("#theme")
    page.set_viewport_size({"width": 420, "height": 860})
    show_tab(page, "value")
    page.screenshot(path=str(out / "narrow.png"), full_page=True)
    assert (out / "narrow.png").stat().st_size > 10_000


def test_every_example_runs_as_it_should(page: Any) -> None:
    options = page.locator("#examples option").all()
    ids = [o.get_attribute("value") for o in options if o.get_attribute("value")]
    assert len(ids) >= 7
    for example in ids:
        page.select_option("#examples", example)
        want = "error" if example == "sharp-bit" else "ok"
        assert wait_done(page) == want, (example, page.inner_text("#panel-errors"))
        if example == "flax-nnx-step":  # an nnx.State: the Value pane's tree, per module
            show_tab(page, "value")
            tree = page.inner_text("#panel-value .value-tree")
            assert "['hidden']" in tree and "['kernel'].value" in tree, tree
            # Linear(3, 8) + Linear(8, 1): 41 parameters (Flax's repr: 8 + 24 + 1 + 8)
            assert "41 params" in tree, tree
            page.click(".libs-btn")  # the libraries popover: this JAX's flax, what the run had
            flax = page.inner_text(".libs-popover li[data-library=flax]")
            assert installed_here()["flax"] in flax, flax
            page.keyboard.press("Escape")
            show_tab(page, "jaxpr")
        if example == "pallas-tiled-matmul":  # the Kernels tab: IRs and the grid map
            show_tab(page, "kernels")
            kernel = page.locator("#panel-kernels article.kernel").first
            titles = kernel.locator("summary").all_inner_texts()
            assert any("Mosaic-TPU" in t for t in titles), titles
            assert any("Triton IR" in t for t in titles), titles
            # grid point (1, 1) reads x's row block 1 and y's column block 1
            kernel.locator(".kernel-cell[data-point='3']").hover()
            touched = kernel.locator(".kernel-touched").inner_text()
            assert touched.startswith("(1, 1)"), touched
            assert "[128:256, 0:256]" in touched and "[0:256, 128:256]" in touched, touched
            assert kernel.locator(".kernel-block[visibility=visible]").count() == 3
            show_tab(page, "jaxpr")
        if example == "profile-mlp":  # the Profile tab: rows of the run's HLO, at lines
            show_tab(page, "profile")
            summary = page.locator("[data-testid=profile-summary]").first.inner_text()
            assert "calls profiled" in summary, summary
            rows = page.locator("#panel-profile table.profile tbody tr")
            assert rows.count() >= 1
            lines = rows.locator("td:nth-child(6)").all_inner_texts()
            assert any(t.strip().isdigit() for t in lines), lines  # tied to a code line
            show_tab(page, "jaxpr")
        if example == "pmap":
            assert "4 devices" in page.inner_text(".worker")
            assert "pmap" in output_text(page, "jaxpr") or "shard_map" in output_text(page, "jaxpr")
