"""The worker's side of the Redis Streams pool: take jobs, run them locally, write events.

A ``QueueWorker`` wraps a local pool (the jailed warm pool in production) and is one
consumer, named by its id, in its backend's consumer group. It
- registers itself (backend, devices, JAX version: learnt from one probe run) under a
  key whose TTL every heartbeat renews, so a dead worker vanishes by itself;
- takes at most as many jobs as it has free runs (``XREADGROUP COUNT``), runs each
  for the job's tenant, and writes every event to the run's stream (``accepted``
  carries the run id the server gave the run), ``done`` last; then acknowledges and
  deletes the job, and lets the event stream expire;
- renews its claim on the jobs it runs with every heartbeat (``XCLAIM ... JUSTID``),
  so that only a dead worker's jobs look idle, and polls their cancel keys;
- caps the bytes of one run's events it writes to Redis (``max_event_bytes``: the
  jail's own cap, JAXPLAY_EVENT_BYTES, enforced again where the events leave this
  machine, whatever the local pool): past it the run is cancelled and ends
  ``killed``, so no run can fill the Redis every run shares;
- reclaims dead workers' jobs (``XAUTOCLAIM``, idle > ``dead_after_s``): a job whose
  run had started ends with ``done`` ``killed`` and a reason that says so (its output
  is half-sent, so it is not re-run); one that had not started is re-queued, up to
  ``max_attempts`` takings; a finished one is only acknowledged;
- rides out Redis restarts: every loop retries with backoff, the consumer group is
  created again when it is gone, events wait in order until Redis is back;
- on stop, takes nothing new, lets runs finish for ``drain_s``, cancels the rest,
  and deregisters.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from redis.exceptions import RedisError, ResponseError

from sandbox.pool.base import ChoosesLibraries, Pool, PoolFull, RunHandle, WaitsReady
from sandbox.protocol import PROTOCOL_VERSION, DoneStatus, RunRequest, done_event
from sandbox.queue.keys import (
    GROUP,
    JOBS_MAXLEN,
    BadJob,
    Job,
    Keys,
    decode_event,
    entry_ms,
)
from sandbox.queue.redact import redact_url
from sandbox.queue.transport import RedisClient, connect, publish, still_wanted, stream_entries
from sandbox.supervisor import human_bytes

if TYPE_CHECKING:
    from sandbox.jail.settings import JailLimits

log = logging.getLogger(__name__)

#: The run that tells a worker what it runs on (devices, JAX version) at start.
PROBE_CODE = "def f():\n    return 0\n"
#: How often running jobs' cancel keys are looked at.
CANCEL_POLL_S = 0.25
#: How long events of a run are retried while Redis is away before they are dropped.
PUBLISH_RETRY_S = 120.0


class WorkerStartError(RuntimeError):
    """The worker cannot serve: its probe run failed, or Redis never answered."""


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"


@dataclass
class _Running:
    entry_id: str
    job: Job
    handle: RunHandle | None = None
    cancelled: bool = False


@dataclass
class WorkerInfo:
    """What the worker registers; ``worker`` is the probe's ``accepted`` worker."""

    worker: dict[str, Any] = field(default_factory=dict)
    pool: str = ""
    #: library -> the alternative versions its pool runs on the probe's JAX version
    #: (sandbox/environments/library_choices.py: the overlays installed here); servers offer them
    alternatives: dict[str, list[str]] = field(default_factory=dict)


class _Jailed(Protocol):
    @property
    def limits(self) -> JailLimits: ...


class WorkerSettings(Protocol):
    """The settings a worker machine runs by, read by name from the program's one
    settings object (backend/app/core/settings.py's ``Settings`` is one): the queue's, the
    worker's, and the jail's cap on one run's events."""

    @property
    def queue_url(self) -> str | None: ...
    @property
    def queue_prefix(self) -> str: ...
    @property
    def events_ttl_s(self) -> float: ...
    @property
    def worker_backend(self) -> str: ...
    @property
    def worker_id(self) -> str | None: ...
    @property
    def worker_runs(self) -> int: ...
    @property
    def worker_heartbeat_s(self) -> float: ...
    @property
    def worker_dead_after_s(self) -> float: ...
    @property
    def worker_drain_s(self) -> float: ...
    @property
    def sandbox(self) -> _Jailed: ...


class QueueWorker:
    @classmethod
    def from_settings(cls, settings: WorkerSettings, pool: Pool) -> QueueWorker:
        """The worker ``settings`` describe, running jobs on ``pool``."""
        if not settings.queue_url:
            raise ValueError("a worker needs queue_url (JAXPLAY_QUEUE_URL=redis://...)")
        return cls(
            settings.queue_url,
            settings.worker_backend,
            pool,
            prefix=settings.queue_prefix,
            worker_id=settings.worker_id,
            capacity=settings.worker_runs,
            heartbeat_s=settings.worker_heartbeat_s,
            dead_after_s=settings.worker_dead_after_s,
            events_ttl_s=settings.events_ttl_s,
            drain_s=settings.worker_drain_s,
            # the jail's own cap on one run's events, again where they go into Redis
            max_event_bytes=settings.sandbox.limits.event_bytes,
        )

    def __init__(
        self,
        url: str,
        backend: str,
        pool: Pool,
        *,
        prefix: str = "jaxplay",
        worker_id: str | None = None,
        capacity: int = 0,
        heartbeat_s: float = 2.0,
        dead_after_s: float = 10.0,
        events_ttl_s: float = 300.0,
        max_attempts: int = 2,
        drain_s: float = 30.0,
        probe_timeout_s: float = 120.0,
        max_event_bytes: int = 64 * 1024 * 1024,
        redis: RedisClient | None = None,
    ) -> None:
        if heartbeat_s * 2 > dead_after_s:
            raise ValueError("dead_after_s must be at least twice heartbeat_s")
        self.url = url
        self.backend = backend
        self.pool = pool
        self.keys = Keys(prefix)
        self.id = worker_id or default_worker_id()
        self.capacity = capacity
        self.heartbeat_s = heartbeat_s
        self.dead_after_s = dead_after_s
        self.events_ttl_s = events_ttl_s
        self.max_attempts = max(1, max_attempts)
        self.drain_s = drain_s
        self.probe_timeout_s = probe_timeout_s
        self.max_event_bytes = max_event_bytes
        self.info = WorkerInfo()
        self.runs = 0
        self.reclaimed = 0
        self.started = time.time()
        self._redis = redis
        self._running: dict[str, _Running] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._freed = asyncio.Event()
        self._taken = 0  # jobs read and not yet finished
        self._pause_until = 0.0
        self._stopping = False
        self._jobs = self.keys.jobs(backend)

    @property
    def redis(self) -> RedisClient:
        assert self._redis is not None, "the worker is not started"
        return self._redis

    # --- lifecycle ----------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set; then drain and deregister."""
        if self._redis is None:
            self._redis = connect(self.url)
        await self.pool.start()
        loops: list[asyncio.Task[None]] = []
        try:
            if isinstance(self.pool, WaitsReady):
                await self.pool.ready()
            await self._probe()
            if not self.capacity:
                self.capacity = int(self.pool.stats().get("capacity") or 1)
            await self._wait_for_redis(stop)
            if stop.is_set():
                return
            await self._ensure_group()
            await self._heartbeat()
            log.info(
                "worker %s: serving %s (%s), %d at once",
                self.id,
                self.backend,
                self.info.worker,
                self.capacity,
            )
            loops = [
                asyncio.create_task(self._forever(self._heartbeat, self.heartbeat_s)),
                asyncio.create_task(self._forever(self._poll_cancels, CANCEL_POLL_S)),
                asyncio.create_task(self._forever(self._reclaim, max(0.5, self.dead_after_s / 2))),
                asyncio.create_task(self._consume()),
            ]
            await stop.wait()
        finally:
            self._stopping = True
            await self._drain(loops)
            await self._deregister()
            await self.pool.close()
            await self.redis.aclose()

    async def _wait_for_redis(self, stop: asyncio.Event) -> None:
        said = 0.0
        while not stop.is_set():
            try:
                await self.redis.ping()
                return
            except RedisError as exc:
                if time.monotonic() - said > 10:
                    log.warning(
                        "worker %s: waiting for Redis at %s: %s", self.id, redact_url(self.url), exc
                    )
                    said = time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)

    async def _probe(self) -> None:
        request = RunRequest.model_validate(
            {
                "code": PROBE_CODE,
                "outputs": ["jaxpr"],
                "backend": self.backend,
                "timeout_s": self.probe_timeout_s,
            }
        )
        handle = await self.pool.submit(request, f"worker:{self.id}:probe")
        worker: dict[str, Any] = {}
        done: dict[str, Any] = {}
        async for event in handle.events():
            if event.get("type") == "accepted" and isinstance(event.get("worker"), dict):
                worker = event["worker"]
            elif event.get("type") == "done":
                done = event
        if done.get("status") != "ok" or not worker:
            raise WorkerStartError(
                f"the probe run on {self.backend} failed: {done.get('status')} "
                f"{done.get('reason') or ''}".rstrip()
            )
        alternatives: dict[str, list[str]] = {}
        version = worker.get("jax_version")
        if isinstance(self.pool, ChoosesLibraries) and isinstance(version, str):
            for name, entry in self.pool.library_menu(version).items():
                if isinstance(picks := entry.get("alternatives"), list) and picks:
                    alternatives[name] = [str(v) for v in picks]
        self.info = WorkerInfo(
            worker=worker, pool=str(self.pool.stats().get("kind", "")), alternatives=alternatives
        )

    async def _drain(self, loops: list[asyncio.Task[None]]) -> None:
        for task in loops:
            task.cancel()
        if loops:
            await asyncio.wait(loops, timeout=5.0)
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=self.drain_s)
            if pending:
                for running in list(self._running.values()):
                    if running.handle is not None and not running.cancelled:
                        running.cancelled = True
                        with contextlib.suppress(Exception):
                            await running.handle.cancel()
                await asyncio.wait(pending, timeout=5.0)
        for task in list(self._tasks):
            task.cancel()

    async def _deregister(self) -> None:
        with contextlib.suppress(RedisError, OSError):
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.delete(self.keys.worker(self.id))
                pipe.srem(self.keys.workers, self.id)
                await pipe.execute()
            # Forget the consumer too, unless a job is still pending with it (one read
            # as the loop was stopped): deleting the consumer would drop that job,
            # whereas a live worker reclaims it once this one is gone.
            mine = await self.redis.xpending_range(
                self._jobs, GROUP, min="-", max="+", count=1, consumername=self.id
            )
            if not mine:
                await self.redis.xgroup_delconsumer(self._jobs, GROUP, self.id)

    async def _forever(self, step: Any, every_s: float) -> None:
        """Call ``step`` every ``every_s`` seconds, whatever Redis does meanwhile."""
        while not self._stopping:
            try:
                await step()
            except (RedisError, OSError) as exc:
                log.info("worker %s: %s: %s (will retry)", self.id, step.__name__, exc)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("worker %s: %s failed", self.id, step.__name__)
            still_wanted()  # whether or not the library let the cancellation through
            await asyncio.sleep(every_s)

    # --- registration -------------------------------------------------------------

    def registration(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "backend": self.backend,
            "protocol": PROTOCOL_VERSION,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "pool": self.info.pool,
            "worker": self.info.worker,
            "alternatives": self.info.alternatives,
            "capacity": self.capacity,
            "running": len(self._running),
            "runs": self.runs,
            "reclaimed": self.reclaimed,
            "started": self.started,
        }

    async def _heartbeat(self) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(
                self.keys.worker(self.id),
                json.dumps(self.registration()),
                px=int(self.dead_after_s * 1000),
            )
            pipe.sadd(self.keys.workers, self.id)
            entries = [r.entry_id for r in self._running.values()]
            if entries:
                # resets their idle time: only a dead worker's jobs look idle
                pipe.xclaim(self._jobs, GROUP, self.id, 0, entries, justid=True)
            await pipe.execute(raise_on_error=False)

    async def _ensure_group(self) -> None:
        try:
            await self.redis.xgroup_create(self._jobs, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    # --- taking jobs --------------------------------------------------------------

    async def _consume(self) -> None:
        backoff = 0.2
        while not self._stopping:
            still_wanted()
            free = self.capacity - self._taken
            wait = self._pause_until - time.monotonic()
            if free <= 0 or wait > 0:
                self._freed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._freed.wait(), max(wait, 1.0))
                continue
            try:
                reply = await self.redis.xreadgroup(
                    GROUP, self.id, {self._jobs: ">"}, count=free, block=1000
                )
                backoff = 0.2
            except ResponseError as exc:
                if "NOGROUP" in str(exc):  # Redis lost it (a restart without persistence)
                    with contextlib.suppress(RedisError):
                        await self._ensure_group()
                    continue
                raise
            except (RedisError, OSError) as exc:
                still_wanted()
                log.info("worker %s: reading jobs: %s (retrying)", self.id, exc)
                await asyncio.sleep(backoff)
                backoff = min(5.0, backoff * 2)
                continue
            for entry_id, fields in stream_entries(reply):
                self._taken += 1  # counted now: the task starts later
                self._spawn(self._take(entry_id, fields or {}))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _take(self, entry_id: str, fields: dict[str, str]) -> None:
        try:
            try:
                job = Job.parse(fields)
            except BadJob as exc:
                log.warning("worker %s: job %s refused: %s", self.id, entry_id, exc)
                if exc.run_id:
                    await self._end(exc.run_id, "error", str(exc), 60.0)
                await self._ack(entry_id)
                return
            running = self._running[job.run_id] = _Running(entry_id, job)
            try:
                await self._run(running)
            finally:
                self._running.pop(job.run_id, None)
        finally:
            self._taken -= 1
            self._freed.set()

    async def _run(self, running: _Running) -> None:
        job, entry_id = running.job, running.entry_id
        redis, keys = self.redis, self.keys
        ttl = job.request.timeout_s + self.events_ttl_s
        if await redis.exists(keys.cancel(job.run_id)):
            await self._end(job.run_id, "cancelled", "cancelled before it started", ttl)
            await self._ack(entry_id)
            return
        seconds, micros = await redis.time()
        waited_ms = seconds * 1000 + micros // 1000 - entry_ms(entry_id)
        if job.max_wait_ms and waited_ms > job.max_wait_ms:
            reason = (
                f"it waited {waited_ms / 1000:.1f} s for a {self.backend} worker; the server "
                f"gives up after {job.max_wait_ms / 1000:g} s"
            )
            await self._end(job.run_id, "error", reason, ttl)
            await self._ack(entry_id)
            return
        async with redis.pipeline(transaction=True) as pipe:
            pipe.hset(keys.run(job.run_id), "owner", self.id)
            pipe.expire(keys.run(job.run_id), math.ceil(ttl + 60))
            await pipe.execute()
        request = job.request
        if request.backend == "auto":
            request = request.model_copy(update={"backend": self.backend})
        try:
            handle = await self.pool.submit(request, job.tenant)
        except PoolFull as exc:
            # Not now (this tenant's or every sandbox is busy): back in the queue, for
            # any worker, and this one takes nothing for a moment.
            self._pause_until = time.monotonic() + exc.retry_after_s
            await self._requeue(entry_id, job, job.attempt)
            return
        except Exception as exc:
            reason = f"the worker could not start the run: {type(exc).__name__}: {exc}"
            await self._end(job.run_id, "error", reason[:1000], ttl)
            await self._ack(entry_id)
            return
        running.handle = handle
        self.runs += 1
        ended = False
        written = 0
        try:
            async for event in handle.events():
                if event.get("type") == "accepted":
                    event = {**event, "run_id": job.run_id}
                ended = event.get("type") == "done"
                written += len(json.dumps(event, separators=(",", ":")))
                if not ended and written > self.max_event_bytes:
                    running.cancelled = True
                    with contextlib.suppress(Exception):
                        await handle.cancel()
                    reason = f"its events passed {human_bytes(self.max_event_bytes)}"
                    await self._end(job.run_id, "killed", reason, ttl)
                    ended = True
                    break
                await self._publish(job.run_id, event, ttl)
                if ended:
                    break
        except Exception as exc:
            log.exception("worker %s: run %s failed", self.id, job.run_id)
            if not ended:
                reason = f"the worker failed: {type(exc).__name__}"
                await self._end(job.run_id, "error", reason, ttl)
        await self._ack(entry_id)

    async def _publish(self, run_id: str, event: dict[str, Any], ttl_s: float) -> None:
        """Write one event, in order; while Redis is away, keep trying (the run's
        later events wait in its local stream meanwhile)."""
        give_up = time.monotonic() + PUBLISH_RETRY_S
        backoff = 0.1
        while True:
            try:
                await publish(self.redis, self.keys, run_id, event, ttl_s)
                return
            except (RedisError, OSError) as exc:
                if time.monotonic() > give_up:
                    log.error("worker %s: event of %s dropped: %s", self.id, run_id, exc)
                    return
                await asyncio.sleep(backoff)
                backoff = min(2.0, backoff * 2)

    async def _end(self, run_id: str, status: DoneStatus, reason: str, ttl_s: float) -> None:
        """End the run ``run_id`` here, with a ``done`` of ``status`` and ``reason``: the
        one place this worker makes one (a run its local pool ran ends with that
        pool's own ``done``, relayed)."""
        await self._publish(run_id, done_event(status, 0.0, reason), ttl_s)

    async def _ack(self, entry_id: str) -> None:
        for _ in range(20):
            try:
                async with self.redis.pipeline(transaction=False) as pipe:
                    pipe.xack(self._jobs, GROUP, entry_id)
                    pipe.xdel(self._jobs, entry_id)
                    await pipe.execute(raise_on_error=False)
                return
            except (RedisError, OSError):
                await asyncio.sleep(0.5)

    async def _requeue(self, entry_id: str, job: Job, attempt: int) -> None:
        again = Job(
            run_id=job.run_id,
            tenant=job.tenant,
            backend=job.backend,
            request=job.request,
            max_wait_ms=job.max_wait_ms,
            attempt=attempt,
        )
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hdel(self.keys.run(job.run_id), "owner")
            pipe.xadd(self._jobs, again.fields(), maxlen=JOBS_MAXLEN, approximate=True)
            pipe.xack(self._jobs, GROUP, entry_id)
            pipe.xdel(self._jobs, entry_id)
            await pipe.execute()

    # --- cancel -------------------------------------------------------------------

    async def _poll_cancels(self) -> None:
        live = [r for r in self._running.values() if r.handle is not None and not r.cancelled]
        if not live:
            return
        flags = await self.redis.mget([self.keys.cancel(r.job.run_id) for r in live])
        for running, flag in zip(live, flags, strict=True):
            if flag is not None and running.handle is not None:
                running.cancelled = True
                self._spawn(running.handle.cancel())

    # --- dead workers -------------------------------------------------------------

    async def _reclaim(self) -> None:
        """End or re-queue the jobs of workers that stopped heartbeating."""
        start = "0-0"
        mine = {r.entry_id for r in self._running.values()}
        for _ in range(100):  # bounded: at most 1600 jobs a round
            try:
                reply = await self.redis.xautoclaim(
                    self._jobs,
                    GROUP,
                    self.id,
                    min_idle_time=int(self.dead_after_s * 1000),
                    start_id=start,
                    count=16,
                )
            except ResponseError as exc:
                if "NOGROUP" in str(exc):
                    return
                raise
            start, claimed = reply[0], reply[1]
            for entry_id, fields in claimed:
                if entry_id not in mine:
                    await self._recover(entry_id, fields or {})
            if start in ("0-0", "0"):
                break
        await self._forget_dead_consumers()

    async def _recover(self, entry_id: str, fields: dict[str, str]) -> None:
        try:
            job = Job.parse(fields)
        except BadJob:
            await self._ack(entry_id)
            return
        redis, keys = self.redis, self.keys
        ttl = job.request.timeout_s + self.events_ttl_s
        owner = await redis.hget(keys.run(job.run_id), "owner") or "a worker"
        last = await redis.xrevrange(keys.events(job.run_id), count=1)
        if last:
            event = decode_event(last[0][1])
            if event is None or event.get("type") != "done":
                reason = (
                    f"the worker running it ({owner}) was lost: no heartbeat for "
                    f"{self.dead_after_s:g} s; the run did not finish"
                )
                await self._end(job.run_id, "killed", reason, ttl)
            await self._ack(entry_id)
        elif job.attempt + 1 < self.max_attempts:
            log.warning(
                "worker %s: re-queueing run %s: its worker (%s) was lost before it started",
                self.id,
                job.run_id,
                owner,
            )
            await self._requeue(entry_id, job, job.attempt + 1)
        else:
            reason = (
                f"{job.attempt + 1} workers were lost before the run could start "
                f"(the last: {owner}); it is not tried again"
            )
            await self._end(job.run_id, "error", reason, ttl)
            await self._ack(entry_id)
        self.reclaimed += 1

    async def _forget_dead_consumers(self) -> None:
        try:
            consumers = await self.redis.xinfo_consumers(self._jobs, GROUP)
        except ResponseError:
            return
        idle_ms = math.ceil(self.dead_after_s * 2000)
        for consumer in consumers:
            name = consumer.get("name")
            if (
                name != self.id
                and not consumer.get("pending")
                and int(consumer.get("idle", 0)) > idle_ms
                and not await self.redis.exists(self.keys.worker(str(name)))
            ):
                await self.redis.xgroup_delconsumer(self._jobs, GROUP, name)
