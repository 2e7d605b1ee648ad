"""The remote pool: runs go through Redis Streams to ``jaxplay worker`` machines.

``submit`` adds the run to its backend's job stream (``auto``: the best backend that
has a live worker) and returns a handle that reads the run's event stream, which any
server replica can read, so a run submitted through one replica can be watched
through another (``watch``). Key names and the job format: ``sandbox.queue.keys``;
the other end: ``sandbox.queue.worker``.

No run hangs. The handle ends the stream itself, with a ``done`` that says why, when
- no worker takes the run within ``queue_timeout_s`` (the worker skips it if it
  comes later);
- the worker that took it stops heartbeating after it started (``dead_after_s``);
  a worker lost *before* the run started is re-queued by a live worker instead
  (``XAUTOCLAIM``), and the handle keeps waiting;
- nothing more arrives within the run's ``timeout_s`` + ``grace_s`` of its start.
What it decides it also writes to the event stream, for other replicas watching.
Back-pressure: ``PoolFull`` when ``max_queue`` runs wait for the backend already, or
when it has no live worker.

What is trusted of a worker (docs/sandbox.md): a worker is a machine the operator
runs, holding the queue's credentials; it is trusted to run what it takes in its own
jails and to relay their events as its local pool gave them. Nothing it writes makes
a run *pristine*: this pool makes no pristine runs (it is no ``MakesPristineRuns``;
``sandbox.pool.base.submit_pristine`` refuses it with PristineUnsupported), so a
remote run is never the evidence that lets an answer reach someone else. The ``worker`` of a run's
``accepted`` is the one the owning worker registered (its probe run, before any
tenant's, sandbox/queue/worker.py), never the one the run's stream carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

from redis.exceptions import RedisError

from sandbox.environments import libraries, library_choices
from sandbox.environments.library_choices import LibraryUnavailable
from sandbox.pool.base import PoolFull
from sandbox.protocol import PROTOCOL_VERSION, DoneStatus, RunRequest, done_event
from sandbox.queue.keys import BACKENDS, JOBS_MAXLEN, Job, Keys, decode_event
from sandbox.queue.redact import redact_url
from sandbox.queue.transport import (
    RedisClient,
    connect,
    live_workers,
    publish,
    queued,
    still_wanted,
    stream_entries,
)

log = logging.getLogger(__name__)


def _alternatives(registered: Any) -> dict[str, list[str]]:
    """A worker's registered ``alternatives`` (library -> versions), what is well formed of it."""
    if not isinstance(registered, dict):
        return {}
    return {
        name: [v for v in versions if isinstance(v, str)]
        for name, versions in registered.items()
        if isinstance(name, str) and isinstance(versions, list)
    }


#: Events read from a run's stream at once (the reader holds them until it yields them).
READ_EVENTS = 16
#: Margin past ``queue_timeout_s`` before the handle gives up on an untaken run (the
#: worker side rejects it at ``queue_timeout_s`` on Redis's own clock).
TAKE_MARGIN_S = 2.0


class _End(NamedTuple):
    """How this pool ends a run it gave up on (``RedisRun._done`` makes its ``done``)."""

    status: DoneStatus
    reason: str
    ms: float = 0.0


class RedisPool:
    """Implements sandbox.pool.base.Pool over Redis Streams, and WatchesRuns."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "jaxplay",
        max_queue: int = 16,
        queue_timeout_s: float = 20.0,
        grace_s: float = 5.0,
        dead_after_s: float = 10.0,
        events_ttl_s: float = 300.0,
        refresh_s: float = 1.0,
        connect_timeout_s: float = 30.0,
    ) -> None:
        self.url = url
        self.keys = Keys(prefix)
        self.max_queue = max(1, max_queue)
        self.queue_timeout_s = queue_timeout_s
        self.grace_s = grace_s
        self.dead_after_s = dead_after_s
        self.events_ttl_s = events_ttl_s
        self.refresh_s = refresh_s
        self.connect_timeout_s = connect_timeout_s
        self._redis: RedisClient | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._snapshot: dict[str, Any] = {"reachable": False, "backends": {}, "at": 0.0}
        self._submitted = 0
        self._handles = 0
        self._tasks: set[asyncio.Task[None]] = set()

    # --- lifecycle ----------------------------------------------------------------

    @property
    def redis(self) -> RedisClient:
        assert self._redis is not None, "the pool is not started"
        return self._redis

    async def start(self) -> None:
        self._redis = connect(self.url)
        deadline = time.monotonic() + self.connect_timeout_s
        while True:
            try:
                await self._redis.ping()
                break
            except RedisError as exc:
                if time.monotonic() > deadline:
                    await self._redis.aclose()
                    raise ConnectionError(
                        f"Redis at {redact_url(self.url)} is unreachable: {exc}"
                    ) from None
                await asyncio.sleep(0.5)
        await self.refresh()
        self._refresher = asyncio.create_task(self._refresh_loop())

    async def close(self) -> None:
        if self._tasks:  # cancels of runs whose readers left
            await asyncio.wait(set(self._tasks), timeout=5.0)
        if self._refresher is not None:
            self._refresher.cancel()
            await asyncio.wait({self._refresher}, timeout=5.0)
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None

    # --- what the workers are -----------------------------------------------------

    async def refresh(self) -> dict[str, Any]:
        """Read the registrations and queue lengths now (stats() shows the last read)."""
        try:
            workers = await live_workers(self.redis, self.keys)
            backends: dict[str, dict[str, Any]] = {}
            for w in workers:
                if w.get("protocol") != PROTOCOL_VERSION or w.get("backend") not in BACKENDS:
                    continue
                view = backends.setdefault(
                    w["backend"],
                    {"workers": [], "capacity": 0, "running": 0, "worker": w.get("worker", {})},
                )
                view["workers"].append(w.get("id"))
                # what every live worker of the backend runs: a pick goes to any of them
                theirs = _alternatives(w.get("alternatives"))
                mine = view.setdefault("alternatives", theirs)
                view["alternatives"] = {
                    name: [v for v in mine.get(name, []) if v in versions]
                    for name, versions in theirs.items()
                    if any(v in versions for v in mine.get(name, []))
                }
                view["capacity"] += int(w.get("capacity") or 0)
                view["running"] += int(w.get("running") or 0)
            for name in {*backends, "cpu"}:
                view = backends.setdefault(
                    name, {"workers": [], "capacity": 0, "running": 0, "worker": {}}
                )
                view["queue_length"] = await queued(self.redis, self.keys, name)
            self._snapshot = {"reachable": True, "backends": backends, "at": time.monotonic()}
        except RedisError as exc:
            still_wanted()
            log.warning("redis pool: cannot read the workers: %s", exc)
            self._snapshot = dict(self._snapshot, reachable=False)
        return self._snapshot

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            await self.refresh()
            still_wanted()

    def _background(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def stats(self) -> dict[str, Any]:
        backends = self._snapshot["backends"]
        return {
            "kind": "redis",
            "reachable": 1 if self._snapshot["reachable"] else 0,
            "workers": sum(len(b["workers"]) for b in backends.values()),
            "running": sum(b["running"] for b in backends.values()),
            "capacity": sum(b["capacity"] for b in backends.values()),
            "queued": sum(b.get("queue_length", 0) for b in backends.values()),
            "runs": self._submitted,
            "backends": {name: dict(b) for name, b in backends.items()},
        }

    # --- library choices (sandbox/environments/library_choices.py) ------------------------------

    def _workers_menu(self) -> tuple[str | None, dict[str, list[str]]]:
        """The JAX version the CPU workers registered and the alternatives every one of
        them runs (only a CPU worker's pool runs them: backend/app/relay/pools.py)."""
        view = self._snapshot["backends"].get("cpu", {})
        worker = view.get("worker") if isinstance(view.get("worker"), dict) else {}
        version = worker.get("jax_version") if view.get("workers") else None
        return (version if isinstance(version, str) else None), view.get("alternatives", {})

    def library_menu(self, version: str) -> dict[str, dict[str, object]]:
        """Library -> ``default`` (the committed lock's) and the ``alternatives`` the
        workers registered, for the version they run."""
        seen, alternatives = self._workers_menu()
        return {
            name: {
                "default": v,
                "alternatives": alternatives.get(name, []) if version == seen else [],
            }
            for name, v in libraries.offered(version).items()
        }

    def resolve_libraries(
        self, version: str | None, choices: dict[str, str]
    ) -> tuple[tuple[str, str], ...]:
        """A request's picks, against what the live workers registered; LibraryUnavailable
        where none runs them."""
        if not choices:
            return ()
        seen, _ = self._workers_menu()
        version = version or seen
        if version is None:
            raise LibraryUnavailable(
                "no worker is registered with the queue yet: no library choices"
            )
        return library_choices.choose(version, choices, self.library_menu(version))

    async def _route(self, wanted: str) -> str:
        """The backend a request goes to; PoolFull if none has a live worker."""
        for attempt in range(2):
            backends = self._snapshot["backends"]
            live = [b for b in BACKENDS if backends.get(b, {}).get("workers")]
            if wanted == "auto" and live:
                return live[0]
            if wanted in live:
                return wanted
            if attempt == 0:
                await self.refresh()  # a worker may have registered since the last look
        which = "" if wanted == "auto" else f"{wanted} "
        raise PoolFull(f"no {which}worker is registered with the queue", retry_after_s=2.0)

    # --- runs ---------------------------------------------------------------------

    # No ``submit_pristine``: a remote worker's word that a run was pristine is never
    # taken (its stream is not evidence), so this pool is no MakesPristineRuns.

    async def submit(self, request: RunRequest, tenant: str) -> RedisRun:
        backend = await self._route(request.backend)
        waiting = await queued(self.redis, self.keys, backend, limit=self.max_queue)
        if waiting >= self.max_queue:
            raise PoolFull(f"{waiting} runs are waiting for a {backend} worker", retry_after_s=1.0)
        run_id = uuid.uuid4().hex
        job = Job(
            run_id=run_id,
            tenant=tenant,
            backend=backend,
            request=request,
            max_wait_ms=int(self.queue_timeout_s * 1000),
        )
        ttl = math.ceil(self.queue_timeout_s + request.timeout_s + self.grace_s + self.events_ttl_s)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                self.keys.run(run_id),
                mapping={
                    "backend": backend,
                    "timeout_s": request.timeout_s,
                    "devices": request.devices,
                    # the library versions it picked: its accepted's worker says them
                    "libraries": json.dumps(request.libraries),
                    "at": time.time(),
                },
            )
            pipe.expire(self.keys.run(run_id), ttl)
            pipe.xadd(self.keys.jobs(backend), job.fields(), maxlen=JOBS_MAXLEN, approximate=True)
            entry_id = (await pipe.execute())[-1]
        with contextlib.suppress(RedisError):
            await self.redis.hset(self.keys.run(run_id), "entry", entry_id)
        self._submitted += 1
        return RedisRun(self, run_id, backend, request.timeout_s, entry_id, devices=request.devices)

    async def watch(self, run_id: str) -> RedisRun | None:
        """A handle on a run any replica submitted, its events from the first;
        None if Redis knows no such run (or no longer)."""
        if not run_id.isalnum() or len(run_id) > 64:
            return None
        meta = await self.redis.hgetall(self.keys.run(run_id))
        if not meta:
            return None
        try:
            timeout_s = float(meta.get("timeout_s", 0))
        except ValueError:
            timeout_s = 0.0
        devices = meta.get("devices", "")
        return RedisRun(
            self,
            run_id,
            meta.get("backend", "?"),
            timeout_s,
            meta.get("entry"),
            watching=True,
            devices=int(devices) if devices.isdigit() else None,
        )


def _with_picks(worker: Any, picked: Any, alternatives: dict[str, list[str]]) -> Any:
    """A registered ``worker`` description for a run that picked other library versions
    (``picked``): the owner's registration says it runs them (its ``alternatives``, the
    overlays installed beside it), so its ``libraries`` name them; none else is taken."""
    if not isinstance(worker, dict) or not isinstance(picked, dict) or not picked:
        return worker
    libs = worker.get("libraries")
    if not isinstance(libs, dict):
        return worker
    chosen = {
        name: version
        for name, version in picked.items()
        if name in libs and version in alternatives.get(name, [])
    }
    return dict(worker, libraries={**libs, **chosen}) if chosen else worker


class RedisRun:
    """One run in Redis: its events as they are written, by whichever worker."""

    def __init__(
        self,
        pool: RedisPool,
        run_id: str,
        backend: str,
        timeout_s: float,
        entry_id: str | None,
        *,
        watching: bool = False,
        devices: int | None = None,
    ) -> None:
        self.run_id = run_id
        self.backend = backend
        self._devices = devices
        self._pool = pool
        self._keys = pool.keys
        self._timeout_s = timeout_s
        self._entry_id = entry_id
        self._watching = watching
        self._cancelled = False
        self._started = False  # an event of the run was seen

    # --- cancel -------------------------------------------------------------------

    async def cancel(self) -> None:
        """Tell the worker (any machine) to stop the run; its ``done`` says
        ``cancelled``. A run no worker took yet is taken off the queue at once."""
        if self._cancelled or self._watching:
            return
        self._cancelled = True
        p = self._pool
        ttl = math.ceil(p.queue_timeout_s + self._timeout_s + p.grace_s + TAKE_MARGIN_S)
        redis = p.redis
        try:
            await redis.set(self._keys.cancel(self.run_id), "1", ex=ttl)
            owner = await redis.hget(self._keys.run(self.run_id), "owner")
            if (
                owner is None
                and not self._started
                and self._entry_id is not None
                and await redis.xdel(self._keys.jobs(self.backend), self._entry_id)
            ):
                await self._publish(
                    self._done(_End("cancelled", "cancelled before a worker took it"))
                )
        except RedisError as exc:
            log.warning("redis pool: cancel of %s failed: %s", self.run_id, exc)

    @staticmethod
    def _done(end: _End) -> dict[str, Any]:
        """The ``done`` of a run this pool ends itself: the one place it makes one (a
        run a worker ended carries that worker's)."""
        return done_event(end.status, end.ms, end.reason)

    async def _publish(self, event: dict[str, Any]) -> None:
        with contextlib.suppress(RedisError):
            await publish(self._pool.redis, self._keys, self.run_id, event, self._pool.events_ttl_s)

    # --- events -------------------------------------------------------------------

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        p = self._pool
        stream = self._keys.events(self.run_id)
        last = "0-0"
        began = time.monotonic()
        take_by = began + p.queue_timeout_s + TAKE_MARGIN_S  # until a worker takes it
        taken_at: float | None = None  # when an owner was first seen
        started_at: float | None = None  # when its first event was seen
        next_check = began
        backoff = 0.2
        ended = False
        p._handles += 1
        try:
            while True:
                still_wanted()
                now = time.monotonic()
                if now >= next_check:
                    next_check = now + min(1.0, p.dead_after_s / 3)
                    try:
                        verdict = await self._check(now, take_by, taken_at, started_at)
                    except RedisError:
                        still_wanted()
                        verdict = None
                    if isinstance(verdict, _End):
                        done = self._done(verdict)
                        if not self._watching:
                            await self._publish(done)
                        ended = True
                        yield done
                        return
                    if verdict == "taken" and taken_at is None:
                        taken_at = now
                    elif verdict == "requeued":
                        taken_at, take_by = None, now + p.queue_timeout_s + TAKE_MARGIN_S
                try:
                    # a few at a time: each may be a large event, and the reader may be slow
                    reply = await p.redis.xread({stream: last}, count=READ_EVENTS, block=250)
                    backoff = 0.2
                except RedisError as exc:
                    still_wanted()
                    log.info("redis pool: reading run %s: %s (retrying)", self.run_id, exc)
                    await asyncio.sleep(backoff)
                    backoff = min(2.0, backoff * 2)
                    continue
                for entry_id, fields in stream_entries(reply):
                    last = entry_id
                    event = decode_event(fields)
                    if event is None:
                        continue
                    if started_at is None:
                        started_at = time.monotonic()
                        self._started = True
                    if event["type"] == "accepted":
                        event = await self._registered(event)
                    ended = event["type"] == "done"
                    yield event
                    if ended:
                        return
        finally:
            p._handles -= 1
            if not ended and not self._watching:
                # Nobody reads the run any more (the client left): stop it, as a
                # local pool's run stops when its stream is closed.
                p._background(self.cancel())

    async def _registered(self, event: dict[str, Any]) -> dict[str, Any]:
        """``accepted`` with the ``worker`` its owner registered (devices: the
        request's, on a CPU, where a run sets its own count), not the stream's."""
        p = self._pool
        worker: Any = None
        try:
            owner, picked = await p.redis.hmget(self._keys.run(self.run_id), "owner", "libraries")
            raw = await p.redis.get(self._keys.worker(owner)) if owner else None
            registration = json.loads(raw) if raw else None
            if isinstance(registration, dict):
                worker = _with_picks(
                    registration.get("worker"),
                    json.loads(picked) if picked else {},
                    _alternatives(registration.get("alternatives")),
                )
        except (RedisError, ValueError):
            still_wanted()
        if not isinstance(worker, dict) or not worker:  # its registration expired since
            worker = p._snapshot["backends"].get(self.backend, {}).get("worker")
        if not isinstance(worker, dict) or not worker:
            log.warning("redis pool: run %s: no registered worker to describe it", self.run_id)
            return event
        if worker.get("backend") == "cpu" and self._devices is not None:
            worker = dict(worker, devices=self._devices)
        return {**event, "worker": worker}

    async def _check(
        self, now: float, take_by: float, taken_at: float | None, started_at: float | None
    ) -> _End | str | None:
        """How to end the run now, or what changed: ``taken``, ``requeued``."""
        p = self._pool
        ms = (now - (started_at or now)) * 1000
        if started_at is not None and now > started_at + self._timeout_s + p.grace_s:
            return _End(
                "killed",
                f"no result from the worker within {self._timeout_s:g} s + {p.grace_s:g} s",
                ms,
            )
        owner = await p.redis.hget(self._keys.run(self.run_id), "owner")
        if owner is None:
            if taken_at is not None:
                return "requeued"  # a live worker put it back after its owner was lost
            if started_at is None and now > take_by:
                if not self._watching:  # take it off the queue: a late worker skips it
                    await p.redis.set(
                        self._keys.cancel(self.run_id), "1", ex=math.ceil(p.grace_s + 60)
                    )
                    if self._entry_id is not None:
                        await p.redis.xdel(self._keys.jobs(self.backend), self._entry_id)
                return _End(
                    "error", f"no {self.backend} worker took the run within {p.queue_timeout_s:g} s"
                )
            return None
        alive = await p.redis.exists(self._keys.worker(owner))
        if started_at is not None and not alive:
            return _End(
                "killed",
                f"the worker running it ({owner}) was lost: no heartbeat for {p.dead_after_s:g} s",
                ms,
            )
        # Taken but silent: its owner may be gone before it started (a live worker
        # re-queues it then). Give up only after a whole run's time.
        if (
            taken_at is not None
            and started_at is None
            and now > taken_at + self._timeout_s + p.grace_s + p.dead_after_s
        ):
            return _End("killed", f"the worker that took it ({owner}) never started it")
        return "taken"
