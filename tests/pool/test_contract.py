"""The handle contract (sandbox/pool/base.py), checked against every registered pool
kind that can run here, each built through the registry as the server builds it:
exactly one ``done``, last; ``cancelled`` within ``CANCEL_GRACE_S`` of a cancel; a
pristine run made by the kinds with that capability, and refused, in words naming
the kind, by the others.

``fake`` runs nothing; ``subprocess`` and ``zygote`` (jailed) run the code for real;
``redis`` goes through a real redis-server to a ``QueueWorker`` whose local pool is
the fake (the transport is what is checked there). The code of a run carries the
fake's markers and real Python alike, so each kind does the same thing.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.assembly import pool_registry
from sandbox.assembly.pool_registry import (
    FakeOptions,
    RedisOptions,
    SubprocessOptions,
    ZygoteOptions,
)
from sandbox.jail.settings import GiB, JailLimits, MiB
from sandbox.pool.base import (
    CANCEL_GRACE_S,
    MakesPristineRuns,
    Pool,
    PoolFull,
    PristineUnsupported,
    RunHandle,
    WaitsReady,
    submit_pristine,
)
from sandbox.pool.fake import FakePool
from sandbox.pool.settings import PoolSettings
from sandbox.pool.versioned import VersionedPool
from sandbox.protocol import RunRequest
from tests.gates import skip_without_jail, skip_without_services

pytestmark = pytest.mark.timeout(600)

#: every kind the registry holds that a test machine can run (auto is zygote or
#: subprocess, both here): the list must name them all
KINDS = ["fake", "subprocess", "zygote", "redis"]
#: each kind with the marker of what it needs (make test-fast leaves them out); the
#: subprocess pool starts a Python that imports JAX per run: seconds
NEEDS = {"zygote": pytest.mark.jail, "redis": pytest.mark.redis, "subprocess": pytest.mark.slow}
POOLS = [pytest.param(kind, marks=NEEDS.get(kind, ())) for kind in KINDS]
#: the kinds that make pristine runs (MakesPristineRuns); a Redis worker's word that
#: its run was pristine is no evidence, so that pool refuses them
PRISTINE = {"fake", "subprocess", "zygote"}

OK = "def f():\n    return 1\n"
FAILS = "def f():\n    raise ValueError('no')  # fake: error\n"
HANGS = "import time\n# fake: hang\ndef f():\n    time.sleep(60)\n    return 0\n"


def test_every_registered_kind_is_checked() -> None:
    assert set(pool_registry.KINDS) - {"auto"} == set(KINDS)


# --- a started pool of each kind ----------------------------------------------------


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    from tests.support.services import RedisServer

    skip_without_services(RedisServer.missing())
    directory = Path(tempfile.mkdtemp(prefix="jaxplay-contract-redis-"))
    server = RedisServer(directory).start()
    try:
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.asynccontextmanager
async def started(kind: str, request: pytest.FixtureRequest) -> AsyncIterator[Pool]:
    worker_task: asyncio.Task[None] | None = None
    stop = asyncio.Event()
    if kind == "fake":
        pool = pool_registry.build(kind, FakeOptions())
    elif kind == "subprocess":
        pool = pool_registry.build(kind, SubprocessOptions())
    elif kind == "zygote":
        skip_without_jail()
        limits = JailLimits(max_wall_s=20.0, memory_bytes=1 * GiB, data_bytes=768 * MiB, cpus=1)
        # a slow start (a loaded machine) is not what is checked here
        sizes = PoolSettings(
            pool_size=2, pool_running=1, pool_spares=1, pool_per_tenant=1, pool_start_s=240
        )
        pool = pool_registry.build(kind, ZygoteOptions(limits=limits, pool=sizes))
    else:
        from sandbox.queue.worker import QueueWorker

        url = request.getfixturevalue("redis_url")
        prefix = f"contract-{uuid.uuid4().hex[:8]}"
        worker = QueueWorker(url, "cpu", FakePool(), prefix=prefix, worker_id="contract",
                             heartbeat_s=0.2, dead_after_s=1.0, drain_s=1)  # fmt: skip
        worker_task = asyncio.create_task(worker.run(stop))
        pool = pool_registry.build(
            kind, RedisOptions(url=url, prefix=prefix, refresh_s=0.2, queue_timeout_s=10.0)
        )
    await pool.start()
    try:
        if isinstance(pool, WaitsReady):
            await pool.ready(timeout_s=300)
        if worker_task is not None:
            await _until_a_worker_is_registered(pool)
        yield pool
    finally:
        stop.set()
        await pool.close()
        if worker_task is not None:
            await worker_task


async def _until_a_worker_is_registered(pool: Pool) -> None:
    async with asyncio.timeout(30):
        while not pool.stats().get("workers"):
            await asyncio.sleep(0.1)


def go(coro: Any) -> Any:
    return asyncio.run(coro)


def dones(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "done"]


# --- the contract -------------------------------------------------------------------


@pytest.mark.parametrize("kind", POOLS)
def test_a_run_streams_accepted_first_and_exactly_one_done_last(
    kind: str, request: pytest.FixtureRequest
) -> None:
    async def scenario() -> None:
        async with started(kind, request) as pool:
            for code, status in ((OK, "ok"), (FAILS, "error")):
                handle = await pool.submit(RunRequest.model_validate({"code": code}), "contract")
                events = [e async for e in handle.events()]
                assert events[0]["type"] == "accepted", events[:3]
                assert len(dones(events)) == 1 and events[-1]["type"] == "done", events[-3:]
                assert events[-1]["status"] == status, events[-1]
                await handle.cancel()  # after the end: harmless, changes nothing

    go(scenario())


@pytest.mark.parametrize("kind", POOLS)
def test_a_cancelled_run_ends_cancelled_within_the_grace(
    kind: str, request: pytest.FixtureRequest
) -> None:
    async def scenario() -> None:
        async with started(kind, request) as pool:
            handle = await pool.submit(
                RunRequest.model_validate({"code": HANGS, "timeout_s": 30}), "contract"
            )
            stream = handle.events()
            first = await anext(stream)
            assert first["type"] == "accepted", first
            await handle.cancel()
            await handle.cancel()  # twice: still one done
            rest: list[dict[str, Any]] = []
            async with asyncio.timeout(CANCEL_GRACE_S):
                rest = [e async for e in stream]
            assert len(dones(rest)) == 1 and rest[-1]["type"] == "done", rest[-3:]
            assert rest[-1]["status"] == "cancelled", rest[-1]

    go(scenario())


@pytest.mark.parametrize("kind", POOLS)
def test_a_pristine_run_is_made_where_offered_and_refused_by_name_elsewhere(
    kind: str, request: pytest.FixtureRequest
) -> None:
    async def scenario() -> None:
        async with started(kind, request) as pool:
            run = RunRequest.model_validate({"code": OK})
            assert isinstance(pool, MakesPristineRuns) == (kind in PRISTINE), type(pool)
            if kind not in PRISTINE:
                with pytest.raises(PristineUnsupported, match=f"the {kind} pool makes no pristine"):
                    await submit_pristine(pool, run, "contract")
                return
            handle = await _pristine_when_ready(pool, run)
            events = [e async for e in handle.events()]
            assert events[0]["type"] == "accepted", events[:3]
            assert len(dones(events)) == 1 and events[-1]["type"] == "done", events[-3:]
            assert events[-1]["status"] == "ok", events[-1]
            assert pool.stats()["pristine_runs"] == 1, pool.stats()

    go(scenario())


async def _pristine_when_ready(pool: Pool, run: RunRequest) -> RunHandle:
    """A pristine run, retried while no spare is ready (PoolFull), as the confirmer
    asks for one."""
    async with asyncio.timeout(120):
        while True:
            try:
                return await submit_pristine(pool, run, "contract")
            except PoolFull:
                await asyncio.sleep(0.2)


class _NoPristine:
    """A pool without the capability (as a ``module:factory`` pool may be)."""

    def __init__(self) -> None:
        self._inner = FakePool()

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def submit(self, request: RunRequest, tenant: str) -> RunHandle:
        return await self._inner.submit(request, tenant)

    def stats(self) -> dict[str, Any]:
        return {"kind": "plain"}


def test_a_versioned_pool_makes_pristine_runs_exactly_when_its_default_does(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        run = RunRequest.model_validate({"code": OK})
        offers = VersionedPool(FakePool(), default_version="0.99.0", versions_dir=tmp_path)
        assert isinstance(offers, MakesPristineRuns)
        events = [e async for e in (await submit_pristine(offers, run, "contract")).events()]
        assert events[-1]["status"] == "ok" and offers.default.pristine == [True]  # type: ignore[attr-defined]
        lacks = VersionedPool(_NoPristine(), default_version="0.99.0", versions_dir=tmp_path)
        assert not isinstance(lacks, MakesPristineRuns)
        with pytest.raises(PristineUnsupported, match="the plain pool makes no pristine runs"):
            await submit_pristine(lacks, run, "contract")

    go(scenario())
