"""The result cache: a run's answer is shown to another person only when a pristine
run showed the same.

Decided by construction, never by reading the source for clocks or randomness, and
never by trusting a tenant's process (code in a process can undo any check made in it):

1. **The key holds everything code can read about its request**: the whole request as
   it runs (``timeout_s`` after the server's cap, every output asked for, ``timing``
   included), the worker that runs it (backend, platform, device kind, devices, JAX
   and jaxlib versions, as the pool itself describes its workers — never what a run's
   events claim — within ``cache_worker_ttl_s``; until then there is no key),
   jaxplay's version, a hash of the engine's source, the pool's name and options, and
   this cache's format.
2. **A tenant's run is never evidence on its own.** What a run showed (``stdout``,
   ``stderr``, ``jaxpr``, ``stablehlo``, ``hlo``, ``value``, ``cost``; never ``timing``
   or ``stage``) counts only when it ended ``ok`` without an ``error`` (a ``tampered``
   run never does). The first run of a key leaves a *candidate*, served to no one.
   When someone else asks for it (or its snippet is shared), the server makes a
   **pristine run** of the same request (backend/app/trust/confirm.py:
   a fresh process of a jail that never served a tenant, no persistent compilation
   cache, retired after); only when it showed exactly the same is the entry
   *confirmed*, and the pristine run's own output is what is served. **A
   contradiction asks, the pristine run decides**: a tenant's run that shows
   something else than the entry (``cache: false`` or not, forged or not) changes
   nothing; it asks for a pristine run. A pristine run that disagrees with a tenant's
   candidate takes its place (a candidate still), and the next pristine run decides:
   only two pristine runs that disagree (or a pristine run whose output names its own
   run) make the key *unstable* for good: never served, always run. Code that draws
   unseeded random numbers, reads a clock, ``os.getrandom``... shows something else
   the second time, so it is never answered from the cache.
3. **Output that names its own run** (its run id), or is too large, is never kept:
   a tenant's such run asks for a pristine run, whose own output decides.
4. **A confirmed entry is never replaced**: it only ever becomes unstable.
5. **A cached answer shows its age**: its ``accepted`` carries ``cached_at`` and
   ``age_s``; ``cache: false`` re-runs it.
6. **Its lifetime is no one client's to decide**: candidates count against a quota per
   client group; trimming takes candidates first, then the confirmed entries least
   recently served; unstable keys are remembered apart, under their own cap.

What this cannot see: two runs that agree by chance (a clock read rounded to the
hour, twice within the hour). The age says when the answer was made.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.util
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.app.core.logs import fields, get_logger
from backend.app.core.settings import Settings
from backend.app.storage.base import (
    CANDIDATE,
    CONFIRMED,
    PRISTINE,
    UNSTABLE,
    CacheLimits,
    ResultRecord,
    Storage,
)
from sandbox.environments.library_choices import pool_name
from sandbox.protocol import OUTPUT_TABLE, RunRequest

log = get_logger("cache")

CACHE_FORMAT = 3
#: what a run showed: its streams, every output OUTPUT_TABLE says may be kept, and the
#: rest of an IR text too long for its event (``text_part``: the jaxpr, StableHLO and
#: HLO, which are kept)
CACHED_TYPES = frozenset(
    {
        "stdout",
        "stderr",
        "text_part",
        *(name for name, spec in OUTPUT_TABLE.items() if spec.cached),
    }
)


def engine_fingerprint() -> str:
    """A hash of the sandbox package's source: an engine change is a new cache."""
    spec = importlib.util.find_spec("sandbox")
    digest = hashlib.sha256()
    for root in spec.submodule_search_locations or [] if spec else []:
        for path in sorted(Path(root).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def events_body(accepted: dict[str, Any], shown_text: str) -> str:
    """``_canonical({"events": [accepted, *shown]})`` from ``shown_text``, which is
    ``_canonical(shown)``: a list's JSON is its items' JSON between brackets, each
    item's independent of the others, so the shown events are not encoded twice."""
    inner = shown_text[1:-1]
    return '{"events":[' + _canonical(accepted) + ("," + inner if inner else "") + "]}"


def approx_size(value: Any, limit: int) -> int:
    """A cheap upper estimate of ``value``'s JSON size, counting no further than
    ``limit`` (what a run's events cost to keep, without encoding them)."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, dict):
        total = 2
        for k, v in value.items():
            total += len(k) + 4 + approx_size(v, limit - total)
            if total > limit:
                break
        return total
    if isinstance(value, list | tuple):
        total = 2
        for v in value:
            total += 1 + approx_size(v, limit - total)
            if total > limit:
                break
        return total
    return 24


class KeptEvents:
    """What the cache may use of one run's events, kept as they pass: ``accepted``,
    the shown outputs and ``done``. Nothing once the run showed an ``error`` or went
    past ``limit`` bytes (it is then no evidence): the server holds a run's outputs
    only as long as it can use them."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._size = 0
        self._events: list[dict[str, Any]] | None = []

    def add(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if self._events is None or (kind not in CACHED_TYPES and kind not in ("accepted", "done")):
            if kind == "error":
                self._events = None
            return
        if kind != "done":
            self._size += approx_size(event, self._limit - self._size + 1)
            if self._size > self._limit:
                self._events = None
                return
        self._events.append(event)

    def events(self) -> list[dict[str, Any]] | None:
        """The kept events, or None when the run is no evidence."""
        return self._events


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _tenant_hash(tenant: str) -> str:
    """Who computed an entry, as kept: a hash, never the address or token itself."""
    return _hash(tenant)[:32]


def _group_hash(tenant: str) -> str:
    """The client group of a tenant ``GROUP|NAME`` (backend/app/tenancy/identity.py), hashed:
    what a candidate's quota is counted against."""
    return _hash("group:" + tenant.split("|", 1)[0])[:32]


@dataclass(frozen=True)
class Recorded:
    """What one run's evidence did: the entry's ``state`` afterwards, its ``key``, and
    whether a tenant's run showed something else than the entry (``contradicted``: it
    asks for a pristine run, which decides)."""

    state: str
    key: str
    contradicted: bool = False


@dataclass(frozen=True)
class Hit:
    """A confirmed answer: ``accepted`` first (as its first run reported it), no ``done``."""

    events: list[dict[str, Any]]
    created: float

    def replay(self, run_id: str) -> list[dict[str, Any]]:
        """The events to send, ``accepted`` saying this is a cached answer and how old."""
        made = datetime.datetime.fromtimestamp(self.created, datetime.UTC)
        accepted = dict(
            self.events[0],
            run_id=run_id,
            cached=True,
            cached_at=made.isoformat(timespec="seconds").replace("+00:00", "Z"),
            age_s=round(max(0.0, time.time() - self.created), 1),
        )
        return [accepted, *self.events[1:]]


def _pool_of(request: RunRequest) -> str:
    """The pool a request runs in, as the worker slots name it: its ``jax_version`` ("":
    the default) and the library versions it picks (another zygote, another worker)."""
    return pool_name(request.jax_version or "", request.libraries.items())


class ResultCache:
    def __init__(self, storage: Storage, settings: Settings, *, context: dict[str, Any]) -> None:
        """The cache in ``storage``, sized and switched by ``settings`` (its ``cache_*``);
        ``context``: what every key carries besides the request (the jaxplay and
        protocol versions, the engine, the pool)."""
        self._storage = storage
        self.enabled = (
            settings.cache_enabled
            and settings.cache_max_entries > 0
            and settings.cache_max_bytes > 0
        )
        self._limits = CacheLimits(
            max_entries=settings.cache_max_entries,
            max_bytes=settings.cache_max_bytes,
            candidates_per_group=settings.cache_candidates_per_group,
            max_unstable=settings.cache_max_unstable,
        )
        self._max_entry_bytes = settings.cache_max_entry_bytes
        self._context = context
        self._worker_ttl_s = settings.cache_worker_ttl_s
        #: (requested backend, devices, requested jax_version or "" for the default)
        #: -> (the worker of the last accepted event, when)
        self._workers: dict[tuple[str, int, str], tuple[dict[str, Any], float]] = {}

    # --- what the pool is ------------------------------------------------------------
    def learn_worker(self, request: RunRequest, worker: dict[str, Any]) -> None:
        now = time.monotonic()
        version = _pool_of(request)
        self._workers[(request.backend, request.devices, version)] = (dict(worker), now)
        actual = worker.get("backend")
        if request.backend == "auto" and isinstance(actual, str):
            self._workers[(actual, request.devices, version)] = (dict(worker), now)

    def workers(self) -> dict[tuple[str, int], dict[str, Any]]:
        """(backend, devices) -> the worker last seen running the default JAX version."""
        return {key[:2]: worker for key, (worker, _) in self._workers.items() if not key[2]}

    def _worker_for(self, request: RunRequest) -> dict[str, Any] | None:
        """The worker a run would get, as last seen; None when not seen lately
        (a pool upgraded in place is then noticed by the next run)."""
        seen = self._workers.get((request.backend, request.devices, _pool_of(request)))
        if seen is None or time.monotonic() - seen[1] > self._worker_ttl_s:
            return None
        return seen[0]

    # --- keys ------------------------------------------------------------------------
    def key(self, request: RunRequest, worker: dict[str, Any]) -> str:
        material = {
            "format": CACHE_FORMAT,
            "context": self._context,
            "worker": worker,
            "request": request.model_dump(mode="json"),
        }
        return _hash(_canonical(material))

    def key_for(self, request: RunRequest) -> str | None:
        """The key a run of ``request`` would be kept under now, if known."""
        worker = self._worker_for(request)
        return None if worker is None else self.key(request, worker)

    # --- lookups ---------------------------------------------------------------------
    async def lookup(self, request: RunRequest, tenant: str = "") -> tuple[str, Hit | None]:
        """``("hit", answer)``, or ``(why not, None)``: ``unknown`` (no key yet),
        ``missing``, ``candidate`` (one run so far), ``own`` (one run so far, by
        ``tenant`` itself: its next run is no second opinion), ``unstable`` (runs
        disagreed)."""
        worker = self._worker_for(request)
        if worker is None:
            return "unknown", None
        key = self.key(request, worker)
        try:
            found = await self._storage.get_result(key)
        except Exception as exc:
            log.warning("cache.read_failed", extra=fields(error=type(exc).__name__))
            return "missing", None
        if found is None:
            return "missing", None
        if found.state == CANDIDATE and tenant and found.tenant == _tenant_hash(tenant):
            return "own", None
        if found.state != CONFIRMED:
            return found.state, None
        events: list[dict[str, Any]] = json.loads(found.body)["events"]
        # Belt and braces: the entry must be for this very worker.
        if not events or events[0].get("type") != "accepted" or events[0].get("worker") != worker:
            return "missing", None
        await self._served(key)
        return "hit", Hit(events, found.created)

    async def _served(self, key: str) -> None:
        try:
            await self._storage.mark_served(key)
        except Exception as exc:  # the answer is still good; only its age in the LRU is not
            log.warning("cache.served_failed", extra=fields(error=type(exc).__name__))

    @property
    def max_entry_bytes(self) -> int:
        """A run's shown events past this many bytes are no evidence (so not kept)."""
        return self._max_entry_bytes

    def _evidence(
        self, run_id: str, events: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], str, str, bool] | None:
        """(worker, shown text, body, names itself) of a run that may count, or None."""
        if not events or events[0].get("type") != "accepted" or events[-1].get("type") != "done":
            return None
        if events[-1].get("status") != "ok" or any(e.get("type") == "error" for e in events):
            return None
        worker = events[0].get("worker")
        if not isinstance(worker, dict):
            return None
        shown = [e for e in events[1:-1] if e.get("type") in CACHED_TYPES]
        accepted = {k: v for k, v in events[0].items() if k != "run_id"}
        shown_text = _canonical(shown)
        body = events_body(accepted, shown_text)
        return worker, shown_text, body, bool(run_id) and run_id in shown_text

    async def record(
        self, request: RunRequest, tenant: str, run_id: str, events: list[dict[str, Any]]
    ) -> Recorded | None:
        """A tenant's run as evidence for its key (``events``: the whole run,
        ``accepted`` first, ``done`` last); None if it was no evidence. The first run
        of a key leaves a candidate; any later one changes nothing: one that showed
        something else (``contradicted``) only asks for a pristine run. Output that may
        never be shared (naming its run, too large) is not written at all: it asks
        too, and the pristine run's own output decides (a forged run cannot make a
        key unstable)."""
        found = self._evidence(run_id, events)
        if found is None:
            return None
        worker, shown_text, body, names_itself = found
        key = self.key(request, worker)
        if len(body) > self._max_entry_bytes or names_itself:
            try:
                existing = await self._storage.get_result(key)
            except Exception as exc:
                log.warning("cache.read_failed", extra=fields(error=type(exc).__name__))
                return None
            if existing is not None and existing.state == UNSTABLE:
                return Recorded(UNSTABLE, key)
            return Recorded(existing.state if existing else "missing", key, contradicted=True)
        record = ResultRecord(
            digest=_hash(shown_text),
            tenant=_tenant_hash(tenant),
            body=body,
            state=CANDIDATE,
            group=_group_hash(tenant),
        )
        return await self._write(key, record)

    async def record_pristine(
        self, request: RunRequest, key: str, run_id: str, events: list[dict[str, Any]]
    ) -> Recorded | None:
        """A pristine run's evidence for ``key`` (the key the candidate it checks was
        kept under): it confirms the candidate if it showed the same, and makes the key
        unstable if not. A pristine run that failed, or ran on another worker than the
        key's, is no evidence either way (None)."""
        found = self._evidence(run_id, events)
        if found is None:
            return None
        worker, shown_text, body, names_itself = found
        if self.key(request, worker) != key:
            return None
        state = UNSTABLE if len(body) > self._max_entry_bytes or names_itself else CANDIDATE
        record = ResultRecord(
            digest=_hash(shown_text),
            tenant=PRISTINE,
            body="" if state == UNSTABLE else body,
            state=state,
            group=PRISTINE,
        )
        return await self._write(key, record)

    async def _write(self, key: str, record: ResultRecord) -> Recorded | None:
        try:
            state, digest = await self._storage.record_result(key, record, self._limits)
        except Exception as exc:
            log.warning("cache.write_failed", extra=fields(error=type(exc).__name__))
            return None
        return Recorded(state, key, contradicted=state != UNSTABLE and digest != record.digest)
