"""The result cache: a run's answer is shown to another client only when a fresh run
would show the same.

Decided by construction, never by reading the source for clocks or randomness:

1. **The key holds everything code can read about its request**: the whole request as
   it runs (``timeout_s`` after the server's cap, every output asked for, ``timing``
   included), the worker that runs it (backend, platform, device kind, devices, JAX
   and jaxlib versions, as the pool's last ``accepted`` for that backend reported
   them within ``cache_worker_ttl_s``; until then there is no key), jaxplay's
   version, a hash of the engine's source, the pool's name and options, and this
   cache's format.
2. **Two independent runs must agree.** What a run showed (``stdout``, ``stderr``,
   ``jaxpr``, ``stablehlo``, ``hlo``, ``value``, ``cost``; never ``timing`` or
   ``stage``) is evidence only when it ended ``ok`` without an ``error``. The first
   run of a key leaves a *candidate*, which is served to no one. A run by another
   tenant (its own warm zygote: its own process, seeds, clock reads) that showed
   exactly the same *confirms* it; only a confirmed entry is served. A run that
   showed anything else makes the key *unstable* for good: never served, always run.
   Code that draws unseeded random numbers, reads a clock, ``os.getrandom``, a numpy
   ``Generator``, ``jax_log_compiles``' timings... shows something else the second
   time, so it is never answered from the cache.
3. **Output that names its own run** (its run id) makes the key unstable at once.
4. **An entry is never replaced**: a confirmed answer only ever becomes unstable
   (when a fresh run, e.g. a re-run with ``cache: false``, shows something else).
5. **A cached answer shows its age**: its ``accepted`` carries ``cached_at`` and
   ``age_s``; ``cache: false`` re-runs it.

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

from backend.app.logs import fields, get_logger
from backend.app.storage import (
    CANDIDATE,
    CONFIRMED,
    UNSTABLE,
    CacheLimits,
    ResultRecord,
    Storage,
)
from sandbox.protocol import OUTPUT_TABLE, RunRequest

log = get_logger("cache")

CACHE_FORMAT = 2
#: what a run showed: its streams and every output OUTPUT_TABLE says may be kept
CACHED_TYPES = frozenset(
    {"stdout", "stderr", *(name for name, spec in OUTPUT_TABLE.items() if spec.cached)}
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


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _tenant_hash(tenant: str) -> str:
    """Who computed an entry, as kept: a hash, never the address or token itself."""
    return _hash(tenant)[:32]


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


class ResultCache:
    def __init__(
        self,
        storage: Storage,
        *,
        enabled: bool,
        max_entries: int,
        max_bytes: int,
        max_entry_bytes: int,
        context: dict[str, Any],
        worker_ttl_s: float = 600.0,
    ) -> None:
        self._storage = storage
        self.enabled = enabled and max_entries > 0 and max_bytes > 0
        self._limits = CacheLimits(max_entries=max_entries, max_bytes=max_bytes)
        self._max_entry_bytes = max_entry_bytes
        self._context = context
        self._worker_ttl_s = worker_ttl_s
        #: (requested backend, devices, requested jax_version or "" for the default)
        #: -> (the worker of the last accepted event, when)
        self._workers: dict[tuple[str, int, str], tuple[dict[str, Any], float]] = {}

    # --- what the pool is ------------------------------------------------------------
    def learn_worker(self, request: RunRequest, worker: dict[str, Any]) -> None:
        now = time.monotonic()
        version = request.jax_version or ""
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
        seen = self._workers.get((request.backend, request.devices, request.jax_version or ""))
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
        try:
            found = await self._storage.get_result(self.key(request, worker))
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
        return "hit", Hit(events, found.created)

    async def record(
        self, request: RunRequest, tenant: str, run_id: str, events: list[dict[str, Any]]
    ) -> str | None:
        """One run's evidence for its key (``events``: the whole run, ``accepted``
        first, ``done`` last); answers the entry's state, or None if it was no evidence."""
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
        names_itself = bool(run_id) and run_id in shown_text
        if len(body) > self._max_entry_bytes or names_itself:
            body, state = "", UNSTABLE
        else:
            state = CANDIDATE
        record = ResultRecord(
            digest=_hash(shown_text), tenant=_tenant_hash(tenant), body=body, state=state
        )
        try:
            return await self._storage.record_result(
                self.key(request, worker), record, self._limits
            )
        except Exception as exc:
            log.warning("cache.write_failed", extra=fields(error=type(exc).__name__))
            return None
