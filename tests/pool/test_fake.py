"""The fake pool: scripted events without processes."""

from __future__ import annotations

import asyncio

import pytest

from sandbox.pool.base import PoolFull
from sandbox.pool.fake import FakePool
from sandbox.protocol import RunRequest


def _run(pool: FakePool, code: str = "def f(x):\n    return x\n") -> list[dict]:
    async def go() -> list[dict]:
        run = await pool.submit(RunRequest(code=code), "t")
        return [e async for e in run.events()]

    return asyncio.run(go())


def test_default_script() -> None:
    events = _run(FakePool())
    assert [e["type"] for e in events] == ["accepted", "stage", "jaxpr", "value", "done"]
    assert events[-1]["status"] == "ok"


def test_custom_script_and_error_marker() -> None:
    pool = FakePool(script=[{"type": "stdout", "text": "hi", "stage": "exec"}])
    assert [e["type"] for e in _run(pool)] == ["accepted", "stdout", "done"]
    assert _run(FakePool(), "# fake: error\n")[-1]["status"] == "error"


def test_cancel_a_hanging_run() -> None:
    async def go() -> list[dict]:
        pool = FakePool()
        run = await pool.submit(RunRequest(code="# fake: hang\n"), "t")
        events = []
        async for event in run.events():
            events.append(event)
            if event["type"] == "value":
                await run.cancel()
        return events

    assert asyncio.run(go())[-1]["status"] == "cancelled"


def test_full() -> None:
    async def go() -> None:
        pool = FakePool(max_concurrent=1)
        await pool.submit(RunRequest(code=""), "t")
        with pytest.raises(PoolFull):
            await pool.submit(RunRequest(code=""), "t")

    asyncio.run(go())
