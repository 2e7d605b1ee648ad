"""Issue 37's pages in a real browser against the real server and pool: the ``/stats``
page (its figures the JSON's, its plot drawn with no script, nothing the CSP blocks), a
notebook opened with **Open .ipynb** becoming a link in one step, and **Report**
linking a bug report whose repro is the editor's code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from .conftest import Server
from .test_page import screenshots_dir, set_code


def test_the_stats_page_shows_the_servers_figures(
    page: Any, server: Server, tmp_path: Path
) -> None:
    run = {"code": "def f(x):\n    return x * 3.0\n", "args": "(1.5,)", "outputs": ["jaxpr"]}
    assert httpx.post(server.url + "/api/v1/runs", json=run, timeout=120).status_code == 200
    figures = httpx.get(server.url + "/api/v1/stats").json()
    assert figures["day"]["runs"] >= 1
    page.goto("/stats")
    day = page.locator("[data-testid=stats-day] tbody tr").first
    assert day.locator("th").inner_text() == "all"
    assert int(day.locator("td").first.inner_text()) == figures["day"]["runs"]
    plot = page.locator("[data-testid=stats-plot]")
    assert plot.is_visible() and plot.bounding_box()["width"] > 300
    bars = page.locator("[data-testid=stats-plot] g[data-runs]")
    assert bars.count() == 24
    assert int(bars.nth(23).get_attribute("data-runs")) == figures["day_by_hour"][-1]["runs"]
    assert page.evaluate("() => document.scripts.length") == 0
    page.screenshot(path=str(screenshots_dir(tmp_path) / "stats.png"), full_page=True)


def test_open_a_notebook_and_report_it(page: Any, server: Server, tmp_path: Path) -> None:
    nb = new_notebook(
        cells=[
            new_markdown_cell("# Autodiff cookbook"),
            new_code_cell("!pip install -U jax\n%matplotlib inline\nimport jax.numpy as jnp"),
            new_code_cell("def g(x):\n    return jnp.sum(jnp.cos(x) ** 2)"),
        ]
    )
    path = tmp_path / "cookbook.ipynb"
    path.write_text(nbformat.writes(nb))
    with page.expect_navigation(url="**/s/*"):
        page.set_input_files("[data-testid=notebook-file]", str(path))
    page.wait_for_function("() => window.jaxplay !== undefined")  # the new page's script
    assert "def g(x):" in page.evaluate("() => window.jaxplay.code()")
    assert "pip install" not in page.evaluate("() => window.jaxplay.code()")
    assert page.input_value("#entry") == "g"
    # Report: the link's bug report, whose repro is the editor's code
    set_code(page, "import jax.numpy as jnp\n\ndef g(x):\n    return jnp.sum(jnp.cos(x) ** 2)\n")
    page.fill("#args", "(jnp.ones((2,)),)")
    page.click("#report")
    link = page.locator("[data-testid=report-md]")
    link.wait_for()
    href = link.get_attribute("href")
    assert href.startswith("/api/v1/snippets/") and href.endswith("/report.md")
    report = httpx.get(server.url + href, timeout=180)
    assert report.status_code == 200 and "### Description" in report.text
    assert (
        "return jnp.sum(jnp.cos(x) ** 2)" in report.text
        and "args = (jnp.ones((2,)),)" in report.text
    )


def test_a_notebook_dropped_on_the_editor_becomes_its_link(page: Any) -> None:
    """Dropped on the code itself, a notebook becomes its link, and neither the code
    nor the autosave holds the file's JSON afterwards. (The page takes the drop in the
    capture phase, before the editor's own file drop; a synthetic drop like this one
    does not make CodeMirror read the file in time either, so this checks the outcome,
    not that order.)"""
    nb = new_notebook(cells=[new_code_cell("%%time\ndef dropped(x):\n    return x + 1")])
    transfer = page.evaluate_handle(
        """(text) => {
            const dt = new DataTransfer();
            dt.items.add(new File([text], "dropped.ipynb", {type: "application/x-ipynb+json"}));
            return dt;
        }""",
        nbformat.writes(nb),
    )
    with page.expect_navigation(url="**/s/*"):
        page.dispatch_event("[data-testid=code]", "drop", {"dataTransfer": transfer})
    page.wait_for_function("() => window.jaxplay !== undefined")
    code = page.evaluate("() => window.jaxplay.code()")
    assert code.startswith("def dropped(x):") and "%%time" not in code
    assert "nbformat" not in page.evaluate("() => JSON.stringify(localStorage)")
