"""The result cache: deterministic outputs of runs that ended ``ok``.

What is cached: ``accepted`` (with the worker), ``stdout``/``stderr`` and the
``jaxpr``, ``stablehlo``, ``hlo``, ``value`` and ``cost`` events. Never ``timing``
or ``stage`` (they are measurements), never a run that did not end ``ok`` or that
reported an ``error``.

The key holds everything that can change those outputs:
- the request, canonical, less ``timeout_s`` (it only decides whether a run ends)
  and less ``timing`` among the outputs (a request for timings is answered from the
  cache and then runs for the timings alone);
- the worker that would run it: backend, platform, device kind, devices, JAX and
  jaxlib versions, as the pool's last ``accepted`` event for that (backend,
  devices) reported them. Until the server has seen one, or when it saw it more than
  ``cache_worker_ttl_s`` ago, there is no key: a miss, and that run looks again;
- jaxplay's version, a hash of the engine's source, the pool's name and options,
  and this cache's format.
Code that reads clocks, unseeded randomness, the environment or files is not cached
(a best-effort check of the source); a request can always bypass with ``cache: false``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import time
from pathlib import Path
from typing import Any

from backend.app.logs import fields, get_logger
from backend.app.storage import Storage
from sandbox.protocol import RunRequest

log = get_logger("cache")

CACHE_FORMAT = 1
CACHED_TYPES = frozenset({"stdout", "stderr", "jaxpr", "stablehlo", "hlo", "value", "cost"})

#: Source that makes a run's output depend on more than its request.
_NONDETERMINISTIC = re.compile(
    r"""
      \bimport\s+(random|time|datetime|uuid|secrets)\b
    | \bfrom\s+(random|time|datetime|uuid|secrets|os)\s+import\b
    | \b(np|numpy|onp)\.random\b
    | \b(time|datetime|uuid|secrets)\.
    | \bos\.(urandom|environ|getenv|getpid|times|listdir|scandir|stat)\b
    | \b(open|input|id|hash)\s*\(
    | \bsys\.(argv|flags|path)\b
    | \b__import__\b
    | \bimportlib\b
    """,
    re.VERBOSE,
)


def is_deterministic(request: RunRequest) -> bool:
    texts = [request.code, request.args]
    texts += [json.dumps(t.options) for p in [request.transforms, *request.compare] for t in p]
    return not any(_NONDETERMINISTIC.search(t) for t in texts)


def engine_fingerprint() -> str:
    """A hash of the sandbox package's source: an engine change is a new cache."""
    spec = importlib.util.find_spec("sandbox")
    digest = hashlib.sha256()
    for root in spec.submodule_search_locations or [] if spec else []:
        for path in sorted(Path(root).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _request_part(request: RunRequest) -> dict[str, Any]:
    data = request.model_dump(mode="json", exclude={"timeout_s"})
    data["outputs"] = sorted(o for o in request.outputs if o != "timing")
    return data


class ResultCache:
    def __init__(
        self,
        storage: Storage,
        *,
        enabled: bool,
        max_entries: int,
        max_entry_bytes: int,
        context: dict[str, Any],
        worker_ttl_s: float = 600.0,
    ) -> None:
        self._storage = storage
        self.enabled = enabled and max_entries > 0
        self._max_entries = max_entries
        self._max_entry_bytes = max_entry_bytes
        self._context = context
        self._worker_ttl_s = worker_ttl_s
        #: (requested backend, devices) -> (the worker of the last accepted event, when)
        self._workers: dict[tuple[str, int], tuple[dict[str, Any], float]] = {}

    # --- what the pool is ------------------------------------------------------------
    def learn_worker(self, request: RunRequest, worker: dict[str, Any]) -> None:
        now = time.monotonic()
        self._workers[(request.backend, request.devices)] = (dict(worker), now)
        actual = worker.get("backend")
        if request.backend == "auto" and isinstance(actual, str):
            self._workers[(actual, request.devices)] = (dict(worker), now)

    def workers(self) -> dict[tuple[str, int], dict[str, Any]]:
        return {key: worker for key, (worker, _) in self._workers.items()}

    def _worker_for(self, request: RunRequest) -> dict[str, Any] | None:
        """The worker a run would get, as last seen; None when not seen lately
        (a pool upgraded in place is then noticed by the next run)."""
        seen = self._workers.get((request.backend, request.devices))
        if seen is None or time.monotonic() - seen[1] > self._worker_ttl_s:
            return None
        return seen[0]

    # --- keys ------------------------------------------------------------------------
    def key(self, request: RunRequest, worker: dict[str, Any]) -> str:
        material = {
            "format": CACHE_FORMAT,
            "context": self._context,
            "worker": worker,
            "request": _request_part(request),
        }
        text = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def usable(self, request: RunRequest) -> bool:
        return self.enabled and is_deterministic(request)

    # --- lookups ---------------------------------------------------------------------
    def key_for(self, request: RunRequest) -> str | None:
        """The key a run of ``request`` would be stored under now, if known."""
        worker = self._worker_for(request)
        return None if worker is None else self.key(request, worker)

    async def lookup(self, request: RunRequest) -> list[dict[str, Any]] | None:
        """The cached events (``accepted`` first, no ``done``), or None."""
        worker = self._worker_for(request)
        if worker is None:
            return None
        try:
            body = await self._storage.get_result(self.key(request, worker))
        except Exception as exc:
            log.warning("cache.read_failed", extra=fields(error=repr(exc)))
            return None
        if body is None:
            return None
        entry = json.loads(body)
        events: list[dict[str, Any]] = entry["events"]
        # Belt and braces: the entry must be for this very worker.
        if not events or events[0].get("type") != "accepted" or events[0].get("worker") != worker:
            return None
        return events

    async def store(self, request: RunRequest, events: list[dict[str, Any]]) -> bool:
        """Keep the deterministic part of a run that ended ``ok``."""
        if not events or events[0].get("type") != "accepted" or events[-1].get("type") != "done":
            return False
        if events[-1].get("status") != "ok" or any(e.get("type") == "error" for e in events):
            return False
        worker = events[0].get("worker")
        if not isinstance(worker, dict):
            return False
        kept = [events[0]] + [e for e in events[1:-1] if e.get("type") in CACHED_TYPES]
        body = json.dumps({"events": kept}, separators=(",", ":"), ensure_ascii=False)
        if len(body) > self._max_entry_bytes:
            return False
        try:
            await self._storage.put_result(self.key(request, worker), body, self._max_entries)
        except Exception as exc:
            log.warning("cache.write_failed", extra=fields(error=repr(exc)))
            return False
        return True
