from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sandbox.protocol import RunRequest
from tests.gates import check_jail_gate


def pytest_sessionstart(session: pytest.Session) -> None:
    """The jail gate (tests/gates.py): where the jail is demanded (CI=true,
    JAXPLAY_JAIL_TESTS=require) and missing, no test runs."""
    check_jail_gate()


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
