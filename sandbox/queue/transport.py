"""The Redis transport both ends of the queue share: the client, reading streams,
the live workers, the queue's length, publishing a run's events.

The server's end is ``sandbox.queue.client_pool.RedisPool``; the worker's end is
``sandbox.queue.worker.QueueWorker``. Key names and the job format: ``keys``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from sandbox.queue.keys import EVENTS_MAXLEN, GROUP, Keys, encode_event

#: A ``redis.asyncio.Redis`` made by ``connect``: it decodes replies, so they are
#: ``str`` where redis-py's annotations say ``bytes | str``.
RedisClient = Any


def connect(url: str) -> RedisClient:
    """A client for ``url`` that answers strings and notices dead connections."""
    return aioredis.Redis.from_url(
        url,
        decode_responses=True,
        protocol=2,  # the reply shapes this module parses
        socket_connect_timeout=5,
        socket_keepalive=True,
        health_check_interval=15,
    )


def still_wanted() -> None:
    """Re-raise a cancellation that the client library turned into another error
    (redis-py may report a command cancelled mid-way as a connection error), so
    that a retry loop does not swallow it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def stream_entries(reply: Any) -> list[tuple[str, dict[str, str]]]:
    """The entries of an XREAD/XREADGROUP reply for one stream."""
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3
        return [e for entries in reply.values() for e in (entries[0] if entries else [])]
    return [e for _, entries in reply for e in entries]


async def live_workers(redis: RedisClient, keys: Keys) -> list[dict[str, Any]]:
    """Registrations of the workers whose heartbeat has not expired (the ids of
    expired ones are pruned from the set)."""
    ids = sorted(await redis.smembers(keys.workers))
    if not ids:
        return []
    values = await redis.mget([keys.worker(i) for i in ids])
    found, gone = [], []
    for worker_id, value in zip(ids, values, strict=True):
        if value is None:
            gone.append(worker_id)
            continue
        with contextlib.suppress(ValueError):
            registration = json.loads(value)
            if isinstance(registration, dict):
                found.append(registration)
    if gone:
        await redis.srem(keys.workers, *gone)
    return found


async def queued(redis: RedisClient, keys: Keys, backend: str, limit: int = 1000) -> int:
    """Jobs of ``backend`` no worker has taken yet (counted up to ``limit``)."""
    stream = keys.jobs(backend)
    try:
        groups = await redis.xinfo_groups(stream)
    except ResponseError:  # no such stream: nothing was ever queued
        return 0
    last = next((g.get("last-delivered-id") for g in groups if g.get("name") == GROUP), None)
    if last is None:
        return int(await redis.xlen(stream))
    return len(await redis.xrange(stream, min=f"({last}", max="+", count=limit))


async def publish(
    redis: RedisClient, keys: Keys, run_id: str, event: dict[str, Any], ttl_s: float
) -> None:
    """Append one event to a run's stream (capped, expiring)."""
    async with redis.pipeline(transaction=False) as pipe:
        pipe.xadd(keys.events(run_id), encode_event(event), maxlen=EVENTS_MAXLEN, approximate=True)
        pipe.expire(keys.events(run_id), max(1, math.ceil(ttl_s)))
        await pipe.execute()
