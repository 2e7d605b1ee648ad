from __future__ import annotations

import asyncio
import json
import os
from collections import Counter, OrderedDict
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

# The servers the tests start keep one spare, as the tests were written for, not the
# machine's (PoolSettings.spares: up to 4): each spare is a jail started, and the
# suite starts many servers. tests/pool/test_spares.py tests the machine's number.
os.environ.setdefault("JAXPLAY_POOL_SPARES", "1")

TESTS = Path(__file__).resolve().parent
#: fixtures that bring up a service: a test using one (directly or through another
#: fixture) carries the service's marker
SERVICE_FIXTURES = {"redis_server": "redis", "prefix": "redis", "postgres": "postgres"}
#: what makes a fixture a jail's: it starts one through the jail gate
JAIL_GATE_NAMES = {"skip_without_jail", "make_live_pool"}


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
    """Under pytest-xdist (``make test``), each worker takes whole files, so that a
    module's fixtures (a live server, a jailed pool) are made once; a session fixture
    (the browser folder's server and Chromium, the golden corpus) is made by each worker
    that needs it. Files are handed out the browser's first, then the others, each
    longest first (``heaviest_first``), so that no long file is left for the end.
    (Grouping by the ``xdist_group`` marks cannot be used under pytest 9.2: xdist
    renames the tests' node ids to group them, and pytest 9.2's ids no longer take a
    new name.)"""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # xdist's default: the files with most tests first

    class ByFile(LoadScopeScheduling):
        longest_first = False  # the queue reordered (once, at the first file handed out)

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

        def _assign_work_unit(self, node: Any) -> None:
            # The files' order, once, before the first is handed out. Only the queue is
            # reordered: a worker is sent indices into its own collection, which stays
            # in the order it collected (reordering that sent tests to the wrong files).
            if not self.longest_first:
                self.longest_first = True
                order = heaviest_first(list(self.workqueue), file_weights())
                self.workqueue = OrderedDict((scope, self.workqueue[scope]) for scope in order)
            super()._assign_work_unit(node)

        def _split_scope(self, nodeid: str) -> str:
            return nodeid.split("::", 1)[0]

    return ByFile(config, log)


#: The seconds each file took in a whole ``make test`` (scripts/test_weights.py makes it)
FILE_WEIGHTS = TESTS / "file_weights.json"


def file_weights() -> dict[str, float]:
    """``FILE_WEIGHTS``' figures by file (none where the file is missing)."""
    return json.loads(FILE_WEIGHTS.read_text()) if FILE_WEIGHTS.is_file() else {}


def heaviest_first(nodeids: Sequence[str], weights: dict[str, float]) -> list[str]:
    """``nodeids`` (or files) in the order the scheduler hands their files out: the
    browser's first (its Chromium and server are the package's, made again whenever a
    worker comes back to it after another folder), then the rest, each group longest
    first, so that the last file a worker takes is a short one and neither process
    idles long at the end; a file without a weight (a new one) first of its group.
    A file's tests keep their order."""

    def key(nodeid: str) -> tuple[bool, float]:
        file = nodeid.split("::", 1)[0]
        return (not file.startswith("tests/browser/"), -weights.get(file, float("inf")))

    return sorted(nodeids, key=key)


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
