"""What servers and workers share in Redis: key names, the job entry, the event entry.

All keys start with a prefix (``jaxplay`` by default), so several deployments (or
tests) can share one Redis:

- ``{p}:jobs:{backend}`` (stream): the job queue of ``cpu``, ``gpu`` or ``tpu``, read
  by the consumer group ``workers``; one entry per run, deleted once the run is done.
- ``{p}:events:{run_id}`` (stream): the run's events, one JSON object per entry,
  ``done`` last; capped (``MAXLEN ~``) and expired after the run.
- ``{p}:run:{run_id}`` (hash): what any replica needs to follow a run it did not
  submit (backend, timeout, job entry) and, once a worker took it, its ``owner``.
- ``{p}:cancel:{run_id}`` (string): set by whichever replica cancels; workers poll it.
- ``{p}:worker:{id}`` (string, JSON, with a TTL renewed by every heartbeat): a live
  worker's registration; ``{p}:workers`` (set) lists the ids to look at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sandbox.protocol import PROTOCOL_VERSION, BadEvent, RunRequest, parse_event_line

#: The consumer group every worker of a backend joins.
GROUP = "workers"
#: Backends in the order ``backend: auto`` prefers them.
BACKENDS = ("tpu", "gpu", "cpu")
#: Approximate cap on one run's event stream (``XADD MAXLEN ~``).
EVENTS_MAXLEN = 50_000
#: Approximate cap on a job stream; done jobs are deleted, so it only guards a flood.
JOBS_MAXLEN = 100_000


@dataclass(frozen=True)
class Keys:
    prefix: str = "jaxplay"

    def jobs(self, backend: str) -> str:
        return f"{self.prefix}:jobs:{backend}"

    def events(self, run_id: str) -> str:
        return f"{self.prefix}:events:{run_id}"

    def run(self, run_id: str) -> str:
        return f"{self.prefix}:run:{run_id}"

    def cancel(self, run_id: str) -> str:
        return f"{self.prefix}:cancel:{run_id}"

    def worker(self, worker_id: str) -> str:
        return f"{self.prefix}:worker:{worker_id}"

    @property
    def workers(self) -> str:
        return f"{self.prefix}:workers"


class BadJob(ValueError):
    """A job entry this worker cannot run (malformed, or another protocol version)."""

    def __init__(self, message: str, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


@dataclass(frozen=True)
class Job:
    run_id: str
    tenant: str
    backend: str
    request: RunRequest
    #: how long it may wait in the queue before a worker takes it (the server gives
    #: up on it then); measured on Redis's clock, from the entry's id
    max_wait_ms: int
    #: how many times a worker took it and was lost before starting it
    attempt: int = 0

    def fields(self) -> dict[str, str]:
        return {
            "v": str(PROTOCOL_VERSION),
            "run_id": self.run_id,
            "tenant": self.tenant,
            "backend": self.backend,
            "request": self.request.model_dump_json(),
            "max_wait_ms": str(self.max_wait_ms),
            "attempt": str(self.attempt),
        }

    @classmethod
    def parse(cls, fields: dict[str, str]) -> Job:
        run_id = fields.get("run_id")
        version = fields.get("v")
        if version != str(PROTOCOL_VERSION):
            raise BadJob(
                f"the job speaks protocol version {version}; this worker speaks "
                f"{PROTOCOL_VERSION} (upgrade the older of server and worker)",
                run_id,
            )
        try:
            return cls(
                run_id=str(run_id),
                tenant=fields["tenant"],
                backend=fields["backend"],
                request=RunRequest.model_validate_json(fields["request"]),
                max_wait_ms=int(fields.get("max_wait_ms", "0")),
                attempt=int(fields.get("attempt", "0")),
            )
        except (KeyError, ValueError) as exc:
            raise BadJob(f"a malformed job: {type(exc).__name__}", run_id) from None


def entry_ms(entry_id: str) -> int:
    """The Redis time (ms) at which a stream entry was added: its id's first part."""
    return int(entry_id.split("-", 1)[0])


def encode_event(event: dict[str, Any]) -> dict[str, str]:
    # as the local pools hand events on: whatever the supervisor accepted passes
    return {"e": json.dumps(event, separators=(",", ":"), allow_nan=False)}


def decode_event(fields: dict[str, str]) -> dict[str, Any] | None:
    """An event from a run's stream, read as every reader reads one: bounded, typed
    (``parse_event_line``); None for an entry that is not one."""
    raw = fields.get("e")
    if not isinstance(raw, str):
        return None
    try:
        return parse_event_line(raw.encode("utf-8", "surrogatepass"))
    except BadEvent:
        return None
