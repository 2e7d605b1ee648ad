from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sandbox.protocol import RunRequest
from tests.gates import check_jail_gate, needs_jail

# The services' fixtures, for every test that asks for one (tests/support/fixtures.py).
from tests.support.fixtures import pg_url, postgres, prefix, redis_server  # noqa: F401

# A real jailed warm pool on its own event loop, per module, and one for the session
# (tests/support/live_pool.py).
from tests.support.live_pool import _session_pool, degraded_pool, live_pool, shared_pool  # noqa: F401

TESTS = Path(__file__).resolve().parent
#: fixtures that bring up a service: a test using one (directly or through another
#: fixture) carries the service's marker
SERVICE_FIXTURES = {"redis_server": "redis", "prefix": "redis", "postgres": "postgres"}
#: what makes a fixture a jail's: it starts one through the jail gate
JAIL_GATE_NAMES = {"skip_without_jail", "make_live_pool"}
#: folders whose files share one costly session fixture (one Chromium and live server;
#: the golden corpus's reference processes, all started at once): under pytest-xdist
#: (``make test``) each runs whole in one worker. Every other file is a group of its own,
#: so a module's fixtures (a live server, a jailed pool) are made once.
WHOLE_FOLDER_GROUPS = ("browser", "golden")


def pytest_sessionstart(session: pytest.Session) -> None:
    """The jail gate (tests/gates.py): where the jail is demanded (CI=true,
    JAXPLAY_JAIL_TESTS=require) and missing, no test runs."""
    check_jail_gate()


def _uses_a_jail(item: pytest.Item) -> bool:
    if any(mark == needs_jail.mark for mark in item.iter_markers("skipif")):
        return True
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info else ():
        for fixturedef in defs:
            code = getattr(fixturedef.func, "__code__", None)
            if code is not None and JAIL_GATE_NAMES & set(code.co_names):
                return True
    return False


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist (``make test``), each worker takes whole groups (``_worker_group``):
    a file, or a folder whose files share one session fixture. (Its ``xdist_group`` marks
    cannot say so under pytest 9.2: xdist renames the tests' node ids to group them, and
    pytest 9.2's ids no longer take a new name.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
            # xdist's groups hold the tests by node id, and schemathesis's cases share
            # one (tests/server/test_schema.py: 16 operations, one id): numbered here,
            # else all but one of them would silently never run.
            seen: Counter[str] = Counter()
            unique = []
            for nodeid in collection:
                seen[nodeid] += 1
                unique.append(nodeid if seen[nodeid] == 1 else f"{nodeid}#{seen[nodeid]}")
            super().add_node_collection(node, unique)

        def _split_scope(self, nodeid: str) -> str:
            return _worker_group(TESTS.parent / nodeid.split("::", 1)[0])

    return ByGroup(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The markers (pyproject.toml), given by what a test needs: ``browser`` to everything
    in tests/browser, ``redis`` / ``postgres`` to a test that uses the service's fixture,
    ``jail`` to one that needs the jail (tests/gates.py's needs_jail, or a fixture that
    starts a jail). ``make test-fast`` leaves them out."""
    browser = TESTS / "browser"
    for item in items:
        if browser in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)
        for fixture, marker in SERVICE_FIXTURES.items():
            if fixture in item.fixturenames:
                item.add_marker(getattr(pytest.mark, marker))
        if "pg_url" in item.fixturenames:
            item.add_marker(pytest.mark.postgres)
        if _uses_a_jail(item):
            item.add_marker(pytest.mark.jail)


def _worker_group(path: Path) -> str:
    """The worker group of a test file (``--dist loadgroup``): its folder's where the folder
    shares one session fixture, else the file's."""
    relative = path.relative_to(TESTS)
    if relative.parts[0] in WHOLE_FOLDER_GROUPS:
        return relative.parts[0]
    return relative.as_posix()


def run_events(request: dict[str, Any] | RunRequest) -> list[dict[str, Any]]:
    """Run a request through a fresh worker process (the real engine) and collect its events."""
    from sandbox.pool.subprocess_pool import SubprocessPool

    req = request if isinstance(request, RunRequest) else RunRequest.model_validate(request)

    async def go() -> list[dict[str, Any]]:
        pool = SubprocessPool(max_concurrent=1)
        handle = await pool.submit(req, tenant="tests")
        return [event async for event in handle.events()]

    return asyncio.run(go())


@pytest.fixture
def run() -> Any:
    return run_events
