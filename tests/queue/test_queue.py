"""The Redis Streams pool and its workers, in one process against a real redis-server:
routing, back-pressure, cancel, dead workers (``XAUTOCLAIM``), trimming. The workers
run the fake pool (no JAX), so each case takes well under a second or two."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sandbox.pool.base import PoolFull
from sandbox.pool.fake import FakePool
from sandbox.protocol import RunRequest
from sandbox.queue.client_pool import RedisPool
from sandbox.queue.keys import GROUP, Job, Keys
from sandbox.queue.worker import QueueWorker
from tests.support.services import RedisServer

pytestmark = pytest.mark.timeout(60)

HEARTBEAT_S, DEAD_AFTER_S = 0.2, 1.0


def request(code: str = "", **fields: Any) -> RunRequest:
    return RunRequest.model_validate({"code": f"def f():\n    return 0\n{code}", **fields})


async def collect(pool: RedisPool, req: RunRequest, tenant: str = "t") -> list[dict[str, Any]]:
    handle = await pool.submit(req, tenant)
    return [e async for e in handle.events()]


class Cluster:
    def __init__(self, url: str, prefix: str) -> None:
        self.url, self.prefix, self.keys = url, prefix, Keys(prefix)
        self.workers: list[QueueWorker] = []
        self._stops: list[asyncio.Event] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.pool: RedisPool | None = None

    async def worker(
        self,
        backend: str = "cpu",
        capacity: int = 2,
        worker_id: str | None = None,
        pool: FakePool | None = None,
        **options: Any,
    ) -> QueueWorker:
        w = QueueWorker(
            self.url,
            backend,
            pool or FakePool(max_concurrent=capacity),
            prefix=self.prefix,
            worker_id=worker_id or f"{backend}-{len(self.workers)}",
            heartbeat_s=HEARTBEAT_S,
            dead_after_s=DEAD_AFTER_S,
            events_ttl_s=30,
            drain_s=2,
            **options,
        )
        stop = asyncio.Event()
        self.workers.append(w)
        self._stops.append(stop)
        self._tasks.append(asyncio.create_task(w.run(stop)))
        redis = self.redis()
        for _ in range(200):
            if await redis.exists(self.keys.worker(w.id)):
                break
            await asyncio.sleep(0.02)
        await redis.aclose()
        return w

    async def stop_worker(self, w: QueueWorker) -> None:
        i = self.workers.index(w)
        self._stops[i].set()
        await self._tasks[i]

    def redis(self) -> Any:
        from sandbox.queue.transport import connect

        return connect(self.url)

    async def start_pool(self, **options: Any) -> RedisPool:
        options = {"dead_after_s": DEAD_AFTER_S, "queue_timeout_s": 5.0, **options}
        self.pool = RedisPool(self.url, prefix=self.prefix, refresh_s=0.2, **options)
        await self.pool.start()
        return self.pool

    async def close(self) -> None:
        for stop in self._stops:
            stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.pool is not None:
            await self.pool.close()


@contextlib.asynccontextmanager
async def cluster(
    redis_server: RedisServer, prefix: str, workers: int = 1, **pool_options: Any
) -> AsyncIterator[Cluster]:
    c = Cluster(redis_server.url, prefix)
    try:
        for _ in range(workers):
            await c.worker()
        await c.start_pool(**pool_options)
        yield c
    finally:
        await c.close()


def go(coro: Any, timeout_s: float = 40.0) -> Any:
    """Run a test's coroutine; if it hangs, fail with every task's stack (a hang is
    the bug these tests look for, and pytest-timeout would not show where)."""

    async def guarded() -> Any:
        task = asyncio.ensure_future(coro)
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
        if task in done:
            return task.result()
        stacks = io.StringIO()
        for t in asyncio.all_tasks():
            if t is not asyncio.current_task():
                t.print_stack(limit=8, file=stacks)
        task.cancel()
        raise AssertionError(f"hung for {timeout_s:g} s; tasks:\n{stacks.getvalue()}")

    return asyncio.run(guarded())


def test_runs_flow_to_two_workers(redis_server: RedisServer, prefix: str) -> None:
    async def main() -> None:
        async with cluster(redis_server, prefix, workers=2) as c:
            assert c.pool is not None
            runs = await asyncio.gather(
                *(collect(c.pool, request("# fake: slow=0.05\n"), f"t{i}") for i in range(8))
            )
            for events in runs:
                assert [e["type"] for e in events] == [
                    "accepted",
                    "stage",
                    "jaxpr",
                    "value",
                    "done",
                ]
                assert events[-1]["status"] == "ok"
            assert len({e[0]["run_id"] for e in runs}) == 8
            assert all(w.runs > 0 for w in c.workers), [w.runs for w in c.workers]
            # each tenant string reached the local pools as sent
            tenants = {t for w in c.workers for t in w.pool.tenants}  # type: ignore[attr-defined]
            assert {f"t{i}" for i in range(8)} <= tenants

    go(main())


def test_a_run_whose_events_pass_the_cap_ends_killed_and_redis_keeps_no_more(
    redis_server: RedisServer, prefix: str
) -> None:
    cap = 20_000

    def flood(run: Any) -> list[dict[str, Any]]:
        if "flood" not in run.request.code:
            return [{"type": "value", "repr": "Array(1., dtype=float32)", "tree": []}]
        return [{"type": "stdout", "text": "x" * 4000, "stage": "exec"} for _ in range(50)]

    async def main() -> None:
        c = Cluster(redis_server.url, prefix)
        try:
            await c.worker(pool=FakePool(script=flood), max_event_bytes=cap)
            pool = await c.start_pool()
            events = await collect(pool, request("# flood\n"), "t")
            assert events[-1]["status"] == "killed", events[-1]
            assert events[-1]["reason"] == "its events passed 20000 bytes"
            redis = c.redis()
            stream = c.keys.events(events[0]["run_id"])
            stored = sum(len(f["e"]) for _, f in await redis.xrange(stream))
            await redis.aclose()
            assert stored <= cap, stored
            # the cap is per run: the tenant's next run is normal
            events = await collect(pool, request(), "t")
            assert events[-1]["status"] == "ok", events[-1]
        finally:
            await c.close()

    go(main())


def test_the_handle_s_run_id_is_the_accepted_one_and_any_replica_can_watch(
    redis_server: RedisServer, prefix: str
) -> None:
    async def main() -> None:
        async with cluster(redis_server, prefix) as c:
            assert c.pool is not None
            handle = await c.pool.submit(request("# fake: slow=0.1\n"), "t")
            other = RedisPool(redis_server.url, prefix=prefix)  # another replica
            await other.start()
            try:
                watched_task = asyncio.create_task(_events(other, handle.run_id))
                events = [e async for e in handle.events()]
                watched = await watched_task
                assert events[0]["run_id"] == handle.run_id
                assert watched == events
                # after the end, still replayable until events_ttl_s
                again = await other.watch(handle.run_id)
                assert again is not None and [e async for e in again.events()] == events
                assert await other.watch("0" * 32) is None
            finally:
                await other.close()

    go(main())


async def _events(pool: RedisPool, run_id: str) -> list[dict[str, Any]]:
    handle = await pool.watch(run_id)
    assert handle is not None
    return [e async for e in handle.events()]


def test_auto_prefers_the_best_backend_and_a_missing_one_is_pool_full(
    redis_server: RedisServer, prefix: str
) -> None:
    async def main() -> None:
        async with cluster(redis_server, prefix) as c:
            assert c.pool is not None
            gpu = await c.worker("gpu")
            await c.pool.refresh()  # what every replica does each refresh_s
            await collect(c.pool, request(backend="auto"))
            assert gpu.runs == 1 and c.workers[0].runs == 0
            await collect(c.pool, request(backend="cpu"))
            assert c.workers[0].runs == 1
            with pytest.raises(PoolFull, match="no tpu worker"):
                await c.pool.submit(request(backend="tpu"), "t")
            await c.pool.refresh()
            backends = c.pool.stats()["backends"]
            assert backends["gpu"]["workers"] == ["gpu-1"]
            assert backends["cpu"]["worker"]["jax_version"] == "0.0.fake"
            await c.stop_worker(gpu)  # deregisters at once
            await c.pool.refresh()
            assert not c.pool.stats()["backends"].get("gpu", {}).get("workers")
            await collect(c.pool, request(backend="auto"))
            assert c.workers[0].runs == 2

    go(main())


def test_back_pressure_and_cancel_across_the_queue(redis_server: RedisServer, prefix: str) -> None:
    async def main() -> None:
        async with cluster(redis_server, prefix, workers=0, max_queue=2) as c:
            assert c.pool is not None
            w = await c.worker(capacity=1)
            hang = request("# fake: hang\n")
            running = await c.pool.submit(hang, "a")
            first = asyncio.create_task(_drain(running))
            await _until(lambda: w.runs == 1)
            queued = [await c.pool.submit(hang, "b"), await c.pool.submit(hang, "c")]
            with pytest.raises(PoolFull, match="2 runs are waiting for a cpu worker"):
                await c.pool.submit(hang, "d")
            # cancel a queued run: it leaves the queue at once
            t0 = time.monotonic()
            await queued[0].cancel()
            events = await _drain(queued[0])
            # (a hung run: nothing but the cancel ends it; how soon is a benchmark's figure)
            assert events[-1]["status"] == "cancelled" and time.monotonic() - t0 < 10, events
            assert "before a worker took it" in events[-1]["reason"]
            # cancel the running one (the worker sees it within a poll)
            t0 = time.monotonic()
            await running.cancel()
            events = await first
            assert events[-1] == {**events[-1], "status": "cancelled"}
            assert time.monotonic() - t0 < 10
            # the queued third one now runs; cancel it too
            await _until(lambda: w.runs == 2)
            await queued[1].cancel()
            assert (await _drain(queued[1]))[-1]["status"] == "cancelled"
            assert w.runs == 2  # the cancelled-while-queued run never ran

    go(main())


async def _drain(handle: Any) -> list[dict[str, Any]]:
    return [e async for e in handle.events()]


async def _until(check: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def test_a_run_no_worker_takes_ends_clearly(redis_server: RedisServer, prefix: str) -> None:
    async def main() -> None:
        async with cluster(redis_server, prefix, workers=0, queue_timeout_s=0.5) as c:
            assert c.pool is not None
            w = await c.worker(capacity=1)
            busy = await c.pool.submit(request("# fake: slow=1.5\n"), "a")
            first = asyncio.create_task(_drain(busy))
            await _until(lambda: w.runs == 1)
            events = await collect(c.pool, request(), "b")
            # ended by the queue's 0.5 s (the reason), while the worker was still busy
            assert events[-1]["status"] == "error", events
            assert "no cpu worker took the run within 0.5 s" in events[-1]["reason"]
            assert not first.done()
            assert (await first)[-1]["status"] == "ok"
            # it was taken off the queue: the worker's next run is a new one, not it late
            assert (await collect(c.pool, request("# next\n"), "c"))[-1]["status"] == "ok"
            assert w.runs == 2

    go(main())


def test_a_worker_skips_a_job_that_waited_too_long(redis_server: RedisServer, prefix: str) -> None:
    """Measured on Redis's own clock, so the machines' clocks do not matter."""

    async def main() -> None:
        async with cluster(redis_server, prefix, workers=0) as c:
            redis = c.redis()
            keys = c.keys
            await redis.xgroup_create(keys.jobs("cpu"), GROUP, id="0", mkstream=True)
            job = Job("r" * 32, "t", "cpu", request(), max_wait_ms=1)
            await redis.xadd(keys.jobs("cpu"), job.fields())
            await asyncio.sleep(0.05)
            w = await c.worker()
            done = await _done_in_stream(redis, keys, job.run_id)
            assert done["status"] == "error" and "waited" in done["reason"]
            assert w.runs == 0
            await redis.aclose()

    go(main())


async def _done_in_stream(redis: Any, keys: Keys, run_id: str, timeout_s: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for _, fields in await redis.xrange(keys.events(run_id)):
            event = json.loads(fields["e"])
            if event["type"] == "done":
                return event
        await asyncio.sleep(0.05)
    raise AssertionError(f"no done for {run_id}")


def test_a_job_of_another_protocol_version_ends_with_an_error(
    redis_server: RedisServer, prefix: str
) -> None:
    async def main() -> None:
        async with cluster(redis_server, prefix) as c:
            redis = c.redis()
            fields = {**Job("v" * 32, "t", "cpu", request(), 60_000).fields(), "v": "99"}
            await redis.xadd(c.keys.jobs("cpu"), fields)
            done = await _done_in_stream(redis, c.keys, "v" * 32)
            assert done["status"] == "error" and "protocol version 99" in done["reason"]
            await redis.aclose()

    go(main())


# --- dead workers ----------------------------------------------------------------


async def _ghost_takes(c: Cluster, req: RunRequest, *, started: bool, attempt: int = 0) -> str:
    """A worker that takes a job and dies at once: it never heartbeats again."""
    redis = c.redis()
    keys = c.keys
    run_id = f"g{time.monotonic_ns()}"
    job = Job(run_id, "t", "cpu", req, max_wait_ms=60_000, attempt=attempt)
    await redis.hset(keys.run(run_id), mapping={"backend": "cpu", "timeout_s": 20})
    with contextlib.suppress(Exception):
        await redis.xgroup_create(keys.jobs("cpu"), GROUP, id="0", mkstream=True)
    await redis.xadd(keys.jobs("cpu"), job.fields())
    reply = await redis.xreadgroup(GROUP, "ghost", {keys.jobs("cpu"): ">"}, count=1)
    assert reply, "the ghost got no job"
    await redis.hset(keys.run(run_id), "owner", "ghost")
    if started:
        # a valid accepted, as a real worker writes it (readers drop invalid events)
        worker = {"backend": "cpu", "platform": "cpu", "device_kind": "cpu", "devices": 1,
                  "jax_version": "0", "jaxlib_version": "0"}  # fmt: skip
        accepted = {"type": "accepted", "run_id": run_id, "worker": worker, "pipeline": "main"}
        await redis.xadd(keys.events(run_id), {"e": json.dumps(accepted)})
    await redis.aclose()
    return run_id


def test_a_dead_worker_s_started_run_is_ended_killed(
    redis_server: RedisServer, prefix: str
) -> None:
    async def main() -> None:
        async with cluster(redis_server, prefix, workers=0) as c:
            run_id = await _ghost_takes(c, request(), started=True)
            await c.worker()  # the live one, after the ghost took the job
            redis = c.redis()
            done = await _done_in_stream(redis, c.keys, run_id, timeout_s=30)
            assert done["status"] == "killed", done
            assert "the worker running it (ghost) was lost" in done["reason"]
            # (within _done_in_stream's generous bound: how soon is a benchmark's figure)
            # The worker writes done, acknowledges the job, then counts it: wait for the
            # count, the last of the three, rather than race it.
            await _until(lambda: c.workers[0].reclaimed >= 1)
            assert c.workers[0].reclaimed == 1
            # acknowledged and gone from the queue; its consumer forgotten later
            assert await redis.xlen(c.keys.jobs("cpu")) == 0
            assert (await redis.xpending(c.keys.jobs("cpu"), GROUP))["pending"] == 0
            await redis.aclose()

    go(main())


def test_a_dead_worker_s_run_that_had_not_started_runs_again(
    redis_server: RedisServer, prefix: str
) -> None:
    async def main() -> None:
        async with cluster(redis_server, prefix, workers=0) as c:
            assert c.pool is not None
            run_id = await _ghost_takes(c, request(), started=False)
            await c.worker()  # the live one, after the ghost took the job
            handle = await c.pool.watch(run_id)
            assert handle is not None
            events = await asyncio.wait_for(_drain(handle), 10)
            assert events[-1]["status"] == "ok" and events[0]["run_id"] == run_id
            assert c.workers[0].runs == 1 and c.workers[0].reclaimed == 1

    go(main())


def test_a_run_is_not_taken_again_after_max_attempts(
    redis_server: RedisServer, prefix: str
) -> None:
    async def main() -> None:
        async with cluster(redis_server, prefix, workers=0) as c:
            run_id = await _ghost_takes(c, request(), started=False, attempt=1)
            await c.worker()  # the live one, after the ghost took the job
            redis = c.redis()
            done = await _done_in_stream(redis, c.keys, run_id)
            assert done["status"] == "error" and "2 workers were lost" in done["reason"]
            assert c.workers[0].runs == 0
            await redis.aclose()

    go(main())


def test_the_handle_ends_a_run_whose_only_worker_died(
    redis_server: RedisServer, prefix: str
) -> None:
    """No live worker to reclaim it: the server's handle sees the owner's heartbeat gone."""

    async def main() -> None:
        async with cluster(redis_server, prefix, workers=0) as c:
            assert c.pool is not None
            run_id = await _ghost_takes(c, request(), started=True)
            handle = await c.pool.watch(run_id)
            assert handle is not None
            events = await asyncio.wait_for(_drain(handle), 30)  # a generous bound
            assert events[-1]["status"] == "killed"
            assert "(ghost) was lost: no heartbeat" in events[-1]["reason"]

    go(main())


# --- housekeeping ----------------------------------------------------------------


def test_streams_are_trimmed_and_keys_expire(redis_server: RedisServer, prefix: str) -> None:
    async def main() -> None:
        async with cluster(redis_server, prefix, events_ttl_s=30) as c:
            assert c.pool is not None
            events = await collect(c.pool, request(timeout_s=5))
            run_id = events[0]["run_id"]
            redis = c.redis()
            keys = c.keys
            assert await redis.xlen(keys.jobs("cpu")) == 0  # done jobs are deleted
            assert 0 < await redis.ttl(keys.events(run_id)) <= 35
            assert 0 < await redis.ttl(keys.run(run_id)) <= 5 + 5 + 5 + 30 + 60
            assert 0 < await redis.pttl(keys.worker(c.workers[0].id)) <= DEAD_AFTER_S * 1000
            # events past the cap are trimmed (approximately)
            from sandbox.queue.keys import EVENTS_MAXLEN
            from sandbox.queue.transport import publish

            for _ in range(3):  # a run that writes 1.5 x the cap, as publish() writes
                async with redis.pipeline(transaction=False) as pipe:
                    for _ in range(EVENTS_MAXLEN // 2):
                        pipe.xadd(
                            keys.events("flood"),
                            {"e": "{}"},
                            maxlen=EVENTS_MAXLEN,
                            approximate=True,
                        )
                    await pipe.execute()
            await publish(redis, keys, "flood", {"type": "done"}, 5)
            assert EVENTS_MAXLEN <= await redis.xlen(keys.events("flood")) <= EVENTS_MAXLEN * 1.01
            assert 0 < await redis.ttl(keys.events("flood")) <= 5
            await c.stop_worker(c.workers[0])
            assert not await redis.exists(keys.worker(c.workers[0].id))
            assert await redis.xinfo_consumers(keys.jobs("cpu"), GROUP) == []
            await redis.aclose()

    go(main())


def test_a_stopping_worker_finishes_its_runs_and_takes_no_more(
    redis_server: RedisServer, prefix: str
) -> None:
    async def main() -> None:
        async with cluster(redis_server, prefix, workers=0) as c:
            assert c.pool is not None
            leaving = await c.worker(capacity=1, worker_id="leaving")
            running = await c.pool.submit(request("# fake: slow=0.3\n"), "a")
            first = asyncio.create_task(_drain(running))
            await _until(lambda: leaving.runs == 1)
            stopping = asyncio.create_task(c.stop_worker(leaving))  # as on SIGTERM
            await asyncio.sleep(0.1)
            queued = await c.pool.submit(request(), "b")
            assert (await first)[-1]["status"] == "ok"  # finished, not cancelled
            await stopping
            assert leaving.runs == 1  # it took nothing new
            redis = c.redis()
            assert not await redis.exists(c.keys.worker("leaving"))
            await c.worker(worker_id="staying")
            assert (await _drain(queued))[-1]["status"] == "ok"
            await redis.aclose()

    go(main())


def test_the_redis_pool_makes_no_pristine_run_and_relays_the_registered_worker(
    redis_server: RedisServer, prefix: str
) -> None:
    """Issue 20: a remote worker's stream is never a pristine run, and the ``worker``
    of a run's ``accepted`` is the one its owner registered (its probe run), not the
    one the stream carries."""
    from sandbox.pool.base import MakesPristineRuns, PristineUnsupported, submit_pristine

    async def main() -> None:
        local = FakePool(max_concurrent=2)
        async with cluster(redis_server, prefix, workers=0) as c:
            await c.worker(pool=local)
            pool = await c.start_pool()
            assert not isinstance(pool, MakesPristineRuns)
            with pytest.raises(PristineUnsupported, match="the redis pool makes no pristine runs"):
                await submit_pristine(pool, request(), "t")
            registered = dict(local.worker)
            # the worker's runs now claim another machine (a run made it say so)
            local.worker = dict(local.worker, device_kind="TPU v99", jax_version="6.6.6")
            events = await collect(pool, request(devices=2))
            assert events[-1]["status"] == "ok", events
            assert events[0]["worker"] == dict(registered, devices=2), events[0]

    go(main())
