"""Browser tests: Playwright (Python) driving Debian's Chromium against a real
``jaxplay serve`` (the real pool) on a free loopback port, serving frontend/dist.

Needs ``/usr/bin/chromium`` (``apt-get install chromium``) and the ``playwright``
package; no browser download. Without either, these tests are skipped with the
reason, unless ``JAXPLAY_BROWSER_TESTS=require`` or ``CI=true``: then the session fails at
collection (a usage error, no test runs).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.app.tenancy.identity import SESSION_COOKIE
from tests.gates import browser_required
from tests.support.live_server import LiveServer

ROOT = Path(__file__).resolve().parents[2]
#: the built page; JAXPLAY_TEST_FRONTEND_DIST tries a build made elsewhere (vite --outDir)
#: without touching the committed one
DIST = Path(os.environ.get("JAXPLAY_TEST_FRONTEND_DIST") or ROOT / "frontend" / "dist")
CHROMIUM = os.environ.get("JAXPLAY_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install playwright)"
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    if not (DIST / "index.html").is_file():
        return "frontend/dist is not built (scripts/build_frontend.sh)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    browser = [i for i in items if "tests/browser/" in str(i.fspath).replace(os.sep, "/")]
    why = _missing() if browser else None
    if why is None:
        return
    if browser_required():
        # Demanded (CI): the session fails here, before any test runs; an xfail or a
        # skip would let the browser tests silently not run (tests/gates.py).
        raise pytest.UsageError(f"JAXPLAY_BROWSER_TESTS=require (or CI=true), but {why}")
    for item in browser:
        item.add_marker(pytest.mark.skip(reason=why))


class Server(LiveServer):
    """``jaxplay serve`` as a user starts it, serving the built page (tests/support's
    LiveServer): started at once, ``wait()`` for it to answer."""

    def __init__(self, tmp: Path, settings: dict[str, str] | None = None) -> None:
        """``settings``: JAXPLAY_* variables for this server (a feature an operator turns on)."""
        env = {
            # info: a failing test's report carries the server's run lines (test_page.py)
            "JAXPLAY_LOG_LEVEL": "info",
            "JAXPLAY_METRICS_PUBLIC": "true",
            "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
            # a request waits for the pristine run it asks for: generously, when busy
            "JAXPLAY_CACHE_JOIN_WAIT_S": "120",
            "JAXPLAY_QUEUE_TIMEOUT_S": "120",
            # Every test's visitors come from 127.0.0.1, one client group standing for
            # many people: its pristine line is not what these tests measure (capped
            # at pristine_per_group, the shares of a whole session would be refused).
            "JAXPLAY_PRISTINE_PER_GROUP": "1000",
            "JAXPLAY_PRISTINE_QUEUE": "1000",
            "JAXPLAY_PRISTINE_BUDGET_S": "1000000",
            **(settings or {}),
        }
        super().__init__(
            tmp / "jaxplay.sqlite3",
            "--frontend-dist",
            str(DIST),
            env=env,
            log=tmp / "serve.log",
            as_user=True,
        )
        self.launch()

    def wait(self, timeout_s: float = 60.0) -> None:
        self.wait_ready(timeout_s)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("browser"))
    try:
        srv.wait()
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    # One Chromium for tests/browser (launching one takes ~3 s on a loaded machine),
    # not for the session: Playwright's sync API keeps an asyncio loop running in this
    # thread while it is open, and every later test that calls asyncio.run() would
    # fail. It is closed before pytest moves on to the other test folders (no test here
    # calls asyncio.run). Each test still has its own context (``open_page``).
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="package")
def returning_visitor() -> list[dict[str, Any]]:
    """The session cookie of one visitor who comes back test after test (filled by the
    first ``page``): its runs reuse its kept process, as a person's next visit does,
    instead of each test waiting for a new jail (~1.7 CPU-s apiece, the suite's largest
    cost). A test about a new visitor opens its page with ``open_page(browser, server)``."""
    return []


@pytest.fixture
def page(browser: Any, server: Server, returning_visitor: list[dict[str, Any]]) -> Iterator[Any]:
    """A fresh page (empty storage) on the playground, as the returning visitor (its
    session cookie only); JS errors, and anything the page's Content-Security-Policy
    blocks, fail the test."""
    yield from open_page(browser, server, returning_visitor)


def open_page(
    browser: Any,
    server: Server,
    visitor: list[dict[str, Any]] | None = None,
    hold: str | None = None,
    held: list[Any] | None = None,
) -> Iterator[Any]:
    """The ``page`` fixture's body, for a test's own server (started with settings).
    ``visitor``: cookies to come back with (empty, it is filled with this page's);
    None: a visitor the server has never seen. ``hold``: a URL pattern whose requests
    are held, each route appended to ``held`` for the test to let go
    (``route.continue_()``): a slow network, or a loaded machine, at a chosen moment."""
    context = browser.new_context(viewport={"width": 1440, "height": 900}, base_url=server.url)
    if hold is not None:
        assert held is not None, "hold needs a list for the held routes"
        context.route(hold, lambda route: held.append(route))
    if visitor:
        context.add_cookies(visitor)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    pg = context.new_page()
    pg.jaxplay_server_log = server.log  # for wait_done's report of a run that never ended
    pg.set_default_timeout(30_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on(
        "console",
        lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
    )
    pg.goto("/")
    pg.wait_for_selector("[data-testid=code]")
    if visitor is not None and not visitor:
        visitor.extend(c for c in context.cookies() if c["name"] == SESSION_COOKIE)
        assert visitor, f"the page got no {SESSION_COOKIE} cookie: {context.cookies()}"
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
