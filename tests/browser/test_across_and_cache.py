"""The page's across-versions mode (POST /api/v1/across) and its cached-answer note
with "re-run fresh", in a real browser against the real server, pool and versions."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live_server import pristine_confirmed, wait_for_pristine_confirmed

from .conftest import Server
from .test_page import screenshots_dir, set_code, wait_done

ACROSS_FINAL = ".across-status:is([data-status=ok],[data-status=error],[data-status=cancelled])"
# exact in float32 on every version: the value cannot differ, the texts may
CODE = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(x * 2.0 + 1.0)\n"


def installed_versions(server: Server) -> list[str]:
    backends = httpx.get(server.url + "/api/v1/backends").json()["backends"]
    versions = next(b["versions"] for b in backends if b.get("versions"))
    return [v["version"] for v in versions if v["installed"]]


#: the newest release whose HLO of ``CODE`` differs from the default's: 0.10.2's and
#: 0.12's are the same text, so a comparison of those two shows no changed output
FAR_APART_BELOW = (0, 10)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


def two_versions(server: Server, far_apart: bool = False) -> list[str]:
    """The installed JAX versions, at least two (``far_apart``: the oldest older than
    ``FAR_APART_BELOW``): on a developer's machine without them, the test is skipped
    with the command that installs one; where they are demanded (CI=true: .ci/run
    installs 0.4.38, 0.6.2 and 0.10.2), it fails."""
    installed = installed_versions(server)
    why, add = "", "0.10.2"
    if len(installed) < 2:
        why = f"across versions needs two JAX versions installed, found {installed}"
    elif far_apart and _release(installed[0]) >= FAR_APART_BELOW:
        why = (
            f"a changed output needs a JAX older than {'.'.join(map(str, FAR_APART_BELOW))} "
            f"beside the default, found {installed}"
        )
        add = "0.4.38"
    if why:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true, but {why}")
        pytest.skip(f"{why}: .venv/bin/jaxplay versions add {add}")
    return installed


def test_across_versions_shows_where_each_output_changed_and_the_times(
    page: Any, server: Server
) -> None:
    installed = two_versions(server, far_apart=True)
    oldest, newest = installed[0], installed[-1]
    set_code(page, CODE)
    page.fill("#args", "(jnp.arange(3.0),)")
    page.click("#across")
    assert page.get_attribute("#across", "aria-pressed") == "true"
    assert page.locator(".tabs-row").is_hidden()  # the comparison takes the outputs' place
    picks = page.locator("[data-testid=across-versions] input[type=checkbox]")
    # the picker lists the versions once the page has the server's (GET /api/v1/backends)
    page.wait_for_function(
        "n => document.querySelectorAll("
        "'[data-testid=across-versions] input[type=checkbox]').length >= n",
        arg=len(installed),
    )
    assert [picks.nth(i).get_attribute("value") for i in range(picks.count())] == installed
    # one version is not a comparison: said at once, nothing sent
    for i in range(picks.count()):
        picks.nth(i).set_checked(False)
    page.check(f"[data-testid=across-versions] input[value='{oldest}']")
    page.click("#run")
    status = page.locator("[data-testid=across-status]")
    assert status.get_attribute("data-status") == "error"
    assert "at least 2 versions" in status.inner_text()

    page.check(f"[data-testid=across-versions] input[value='{newest}']")
    with page.expect_request("**/api/v1/across") as sent:
        page.click("#run")
    body = json.loads(sent.value.post_data)
    assert body["versions"] == [oldest, newest] and "jax_version" not in body["request"]
    assert body["request"]["code"] == CODE
    page.wait_for_selector(ACROSS_FINAL, timeout=300_000)
    assert status.get_attribute("data-status") == "ok", page.inner_text("[data-testid=across]")

    outcomes = page.locator("[data-testid=across-outcomes] li")
    assert [outcomes.nth(i).get_attribute("data-version") for i in range(2)] == [oldest, newest]
    rows = page.locator("[data-testid=across-outputs] tbody tr")
    by_output = {rows.nth(i).get_attribute("data-output"): rows.nth(i) for i in range(rows.count())}
    assert {"jaxpr", "stablehlo", "hlo", "value", "cost"} <= set(by_output)
    # the gradient of sum(x * 2 + 1) has the same bits on every version
    assert by_output["value"].locator("[data-testid=first-changed]").inner_text() == "—"
    assert "the same on every version" in by_output["value"].inner_text()
    # eight releases apart, the HLO text differs; the step is named and its diff shown
    changed = [name for name, row in by_output.items() if "changed" in row.get_attribute("class")]
    assert "hlo" in changed, changed
    for name in changed:
        assert by_output[name].locator("[data-testid=first-changed]").inner_text() == newest
        diff = page.locator(f"[data-testid=across-diff][data-output={name}]").first
        assert f"{oldest} → {newest}" in diff.locator("summary").first.inner_text()
        text = diff.locator("pre").first.inner_text()
        assert f"--- {oldest}" in text and f"+++ {newest}" in text
        assert diff.locator(".diff-add, .diff-del").count() > 0
    # the times table: a row per version, stage times and the timing medians
    times = page.locator("[data-testid=across-times]")
    head = times.locator("thead").inner_text()
    for column in ("trace", "lower", "compile", "execute", "per call"):
        assert column in head, head
    assert [times.locator("tbody tr").nth(i).get_attribute("data-version") for i in range(2)] == [
        oldest,
        newest,
    ]
    compile_ms = times.locator("tbody tr td").nth(2).inner_text()
    assert compile_ms.endswith(("ms", "s")) and compile_ms != "—", compile_ms

    # turning the mode off brings the outputs back; Run is an ordinary run again
    page.click("#across")
    assert page.locator("[data-testid=across]").is_hidden()
    page.click("#run")
    assert wait_done(page) == "ok"


def test_screenshots_across_versions(page: Any, server: Server, tmp_path: Path) -> None:
    """docs/screenshots/across.png: an example on the oldest and newest installed JAX,
    where each output first changed, the diff at that step and the times table."""
    installed = two_versions(server)
    out = screenshots_dir(tmp_path)
    page.select_option("#examples", "grad-loss")
    assert wait_done(page) == "ok"
    page.click("#across")
    picks = page.locator("[data-testid=across-versions] input[type=checkbox]")
    for i in range(picks.count()):
        picks.nth(i).set_checked(
            picks.nth(i).get_attribute("value") in (installed[0], installed[-1])
        )
    page.click("#run")
    page.wait_for_selector(ACROSS_FINAL, timeout=300_000)
    status = page.locator("[data-testid=across-status]")
    assert status.get_attribute("data-status") == "ok", page.inner_text("[data-testid=across]")
    assert page.locator("[data-testid=across-diff]").count() > 0  # something to show
    page.screenshot(path=str(out / "across.png"))
    assert (out / "across.png").stat().st_size > 10_000


def test_a_cached_answer_says_its_age_and_re_runs_fresh(
    page: Any, browser: Any, server: Server
) -> None:
    # code of its own, so no other test's runs made this entry
    code = CODE + f"# {uuid.uuid4().hex}\n"

    def frames(pg: Any) -> list[dict[str, Any]]:
        """What the page sends (listened to before it loads: it opens its WebSocket then)."""
        sent: list[dict[str, Any]] = []
        pg.on(
            "websocket",
            lambda ws: ws.on("framesent", lambda payload: sent.append(json.loads(payload))),
        )
        return sent

    def run_in(pg: Any) -> None:
        set_code(pg, code)
        pg.click("#run")
        assert wait_done(pg) == "ok"

    # the first run leaves a candidate; another client asking makes the server's
    # pristine run (that client runs at once: it never waits for a pristine run it
    # asked for), which confirms it; the next client is served it ...
    run_in(page)
    assert page.locator("[data-testid=cached]").count() == 0
    contexts = [
        browser.new_context(viewport={"width": 1200, "height": 800}, base_url=server.url)
        for _ in range(2)
    ]
    try:
        for served, context in zip((False, True), contexts, strict=True):
            confirmed = pristine_confirmed(server)
            pg = context.new_page()
            sent = frames(pg)
            pg.goto("/")
            pg.wait_for_selector("[data-testid=code]")
            run_in(pg)
            assert pg.locator("[data-testid=cached]").count() == int(served)
            if not served:
                wait_for_pristine_confirmed(server, confirmed + 1)
        # ... and from then on it is served, with its age
        note = pg.locator("[data-testid=cached]")
        assert note.inner_text().startswith("cached, less than a minute ago")
        assert "timings are measured fresh" in str(note.get_attribute("title"))
        first = [m for m in sent if m.get("type") == "run"][-1]
        assert "cache" not in first["payload"]
        # re-run fresh: the same request with "cache": false, answered by a run
        pg.click("[data-testid=rerun-fresh]")
        assert wait_done(pg) == "ok"
        again = [m for m in sent if m.get("type") == "run"][-1]
        assert again["payload"] == {**first["payload"], "cache": False}
        assert pg.locator("[data-testid=cached]").count() == 0
    finally:
        for context in contexts:
            context.close()
