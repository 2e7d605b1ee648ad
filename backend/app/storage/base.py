"""What storage is, whichever database holds it: the ``Storage`` protocol, the rows it
keeps (a cached result, a run's public figures), the SQL both databases run for the
result cache, and a snippet's canonical form and id.

Snippets are immutable and content-addressed (SPEC §3, DESIGN "Storage"): the id is
the shortest prefix (at least ``MIN_ID_LENGTH``) of the base32 SHA-256 of
``"jaxplay-snippet-v<FORMAT>\\n" + canonical JSON`` that no other snippet has; the
same content always gets the same id. SQLite (WAL, sqlite.py) and PostgreSQL
(postgres.py, shared by server replicas) have the same schema (both from
backend/app/storage/migrations/) and behaviour behind this ``Storage`` protocol;
url.py's ``open_storage`` picks one by URL.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Protocol

from sandbox.protocol.requests import RunRequest

SNIPPET_FORMAT = 1
MIN_ID_LENGTH = 8

#: An entry's states (backend/app/trust/cache.py says what each means).
CANDIDATE, CONFIRMED, UNSTABLE = "candidate", "confirmed", "unstable"
#: Bytes an entry costs besides its body (key, digests, row overhead).
ROW_OVERHEAD = 256


@dataclass(frozen=True)
class CachedResult:
    state: str
    body: str
    created: float  # when the run that computed it ended (unix seconds)
    tenant: str = ""  # who computed it (a hash, as ResultRecord.tenant)
    digest: str = ""  # what it showed (a hash, as ResultRecord.digest)


#: ``ResultRecord.tenant`` of a pristine run's evidence (backend/app/trust/confirm.py): a
#: value no tenant hash can take (those are 32 hex digits).
PRISTINE = "pristine"


@dataclass(frozen=True)
class ResultRecord:
    """One run's evidence: the digest of what it showed, by whom (a hash, or
    ``PRISTINE``), from which client group (a hash: who pays for a candidate), and the
    body to keep when it is the first or confirms (``state`` is ``unstable`` for output
    that can never be shared, e.g. output naming its own run)."""

    digest: str
    tenant: str
    body: str
    state: str = CANDIDATE
    group: str = ""

    @property
    def size(self) -> int:
        return len(self.body.encode("utf-8")) + ROW_OVERHEAD

    def upsert_params(self, key: str) -> tuple[Any, ...]:
        """RESULT_UPSERT's parameters, in its order, for this record under ``key``."""
        now = time.time()
        return (
            key,
            self.state,
            self.digest,
            self.tenant,
            self.body,
            self.size,
            now,
            self.group,
            now,
        )


@dataclass(frozen=True)
class RunRow:
    """One run's public figures (backend/app/relay/figures.py): when it ended, the JAX
    version that answered, whether the cache did, its status, and the time from its
    key to its first IR event as the server saw it. Nothing else of the run."""

    at: float
    jax_version: str
    cached: bool
    status: str
    first_ir_ms: float | None


@dataclass(frozen=True)
class CacheLimits:
    max_entries: int
    max_bytes: int
    #: candidates one client group may have waiting for a pristine run at once
    candidates_per_group: int = 64
    #: keys remembered as unstable (bodiless rows), beyond the entries above
    max_unstable: int = 100_000


# What the rule below decides, written once for the columns that follow it.
_BY_PRISTINE = f"excluded.tenant = '{PRISTINE}'"
#: the entry's digest is a pristine run's: confirmed, or a pristine run's candidate
_ENTRY_PRISTINE = f"(cache_results.state = 'confirmed' OR cache_results.tenant = '{PRISTINE}')"
_BECOMES_UNSTABLE = f"""(cache_results.state = 'unstable'
             OR ({_BY_PRISTINE} AND (excluded.state = 'unstable'
                 OR ({_ENTRY_PRISTINE} AND cache_results.digest <> excluded.digest))))"""
_CONFIRMS = f"""(cache_results.state = 'candidate' AND {_BY_PRISTINE}
             AND excluded.state <> 'unstable' AND cache_results.digest = excluded.digest)"""
#: a pristine run that disagrees with a tenant's candidate: its own output is the
#: candidate now, and the next pristine run decides
_REPLACES = f"""(cache_results.state = 'candidate' AND cache_results.tenant <> '{PRISTINE}'
             AND {_BY_PRISTINE} AND excluded.state <> 'unstable'
             AND cache_results.digest <> excluded.digest)"""


def _case(column: str, unstable: str, confirms: str, replaces: str) -> str:
    return f"""{column} = CASE
        WHEN {_BECOMES_UNSTABLE} THEN {unstable}
        WHEN {_CONFIRMS} THEN {confirms}
        WHEN {_REPLACES} THEN {replaces}
        ELSE cache_results.{column} END"""


#: One statement, atomic on its row, that is the cache's whole rule: a contradiction
#: asks, the pristine run decides.
#: - the first run of a key leaves a *candidate* (served to no one);
#: - only a pristine run (tenant ``PRISTINE``) that showed the same confirms it, and
#:   its body (not the tenant's) is what is served from then on; a tenant's run adds
#:   nothing, whether it agrees or not (tenant runs are never evidence on their own: a
#:   disagreeing one makes the server ask a pristine run, backend/app/trust/cache.py);
#: - a pristine run that disagrees with a tenant's candidate takes its place (its own
#:   output, tenant ``PRISTINE``: still a candidate, the next pristine run decides);
#: - a pristine run that disagrees with a pristine run's output (a confirmed entry, or
#:   a pristine candidate), or shows output that may never be shared, makes the key
#:   *unstable* for good, its body dropped;
#: - a confirmed entry is never replaced, only made unstable.
#: Parameters: key, state, digest, tenant, body, size, created, grp, served (SQLite
#: ``?``; PostgreSQL takes the same text with ``%s``). Answers the state and digest.
RESULT_UPSERT = f"""
INSERT INTO cache_results (key, state, digest, tenant, body, size, created, grp, served)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
    {_case("state", "'unstable'", "'confirmed'", "'candidate'")},
    {_case("body", "''", "excluded.body", "excluded.body")},
    {_case("size", str(ROW_OVERHEAD), "excluded.size", "excluded.size")},
    {_case("served", "cache_results.served", "excluded.served", "cache_results.served")},
    {_case("digest", "cache_results.digest", "cache_results.digest", "excluded.digest")},
    {_case("tenant", "cache_results.tenant", "cache_results.tenant", "excluded.tenant")},
    {_case("created", "cache_results.created", "cache_results.created", "excluded.created")},
    {_case("grp", "cache_results.grp", "cache_results.grp", "excluded.grp")}
RETURNING state, digest
"""

#: The cache's size now, unstable markers apart (they have their own cap).
RESULT_TOTALS = (
    "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM cache_results WHERE state <> 'unstable'"
)
#: What goes first when the cache is over its limits (parameters: how many):
#: candidates (oldest first), then confirmed entries least recently served. A client
#: filling the cache with new code evicts candidates, its own first (its quota), never
#: a popular confirmed answer before every candidate is gone.
RESULT_OLDEST = """
SELECT key, size FROM cache_results WHERE state <> 'unstable'
ORDER BY CASE WHEN state = 'candidate' THEN 0 ELSE 1 END,
         CASE WHEN state = 'candidate' THEN created ELSE served END, key
LIMIT ?
"""
#: A group's candidates beyond its quota, oldest first (parameters: group, quota).
RESULT_OVER_QUOTA = """
SELECT key FROM cache_results WHERE state = 'candidate' AND grp = ?
ORDER BY created DESC, key LIMIT -1 OFFSET ?
"""
#: Unstable markers beyond their cap, oldest first (parameters: cap).
RESULT_UNSTABLE_OVER = """
SELECT key FROM cache_results WHERE state = 'unstable'
ORDER BY created DESC, key LIMIT -1 OFFSET ?
"""
#: A served confirmed entry is marked so (parameters: now, key, stale-before).
RESULT_SERVED = "UPDATE cache_results SET served = ? WHERE key = ? AND served < ?"
#: How many of the oldest entries a trim reads at a time.
TRIM_BATCH = 256
#: One entry's row (parameter: key).
RESULT_GET = "SELECT state, body, created, tenant, digest FROM cache_results WHERE key = ?"
#: How stale ``served`` may be before a hit writes it again.
SERVED_RESOLUTION_S = 60.0


@dataclass
class Trim:
    """Bringing the cache within its limits, oldest entries first, a batch at a time:
    ``over()`` says whether more must go, ``plan(oldest)`` picks the keys to delete from
    a batch of (key, size) and counts them as gone."""

    count: int
    total: int
    limits: CacheLimits

    def over(self) -> bool:
        return self.count > self.limits.max_entries or self.total > self.limits.max_bytes

    def plan(self, oldest: list[tuple[str, int]]) -> list[str]:
        victims: list[str] = []
        for key, size in oldest:
            if not self.over():
                break
            victims.append(key)
            self.count, self.total = self.count - 1, self.total - int(size)
        return victims


def canonical_json(request: RunRequest) -> str:
    """The request with every default filled in, keys sorted, no spaces; less
    ``jax_version`` when not set (the default), so that a snippet made before
    requests could name a version keeps its id."""
    data = request.model_dump(mode="json")
    if data.get("jax_version") is None:
        data.pop("jax_version", None)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def snippet_digest(canonical: str, fmt: int = SNIPPET_FORMAT) -> str:
    raw = hashlib.sha256(f"jaxplay-snippet-v{fmt}\n{canonical}".encode()).digest()
    return base64.b32encode(raw).decode().rstrip("=").lower()


#: PostgreSQL's SQLSTATE ``disk_full`` (class 53, insufficient resources)
_PG_DISK_FULL = "53100"


def disk_full(exc: BaseException) -> bool:
    """Whether a storage call failed because the database's disk is full: SQLite's
    ``SQLITE_FULL``, PostgreSQL's ``disk_full``, or the OS's ``ENOSPC`` itself. The
    server says so (503 ``storage_full``), unlike a database that is only down."""
    if (
        isinstance(exc, sqlite3.Error)
        and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    ):
        return True
    if getattr(exc, "sqlstate", None) == _PG_DISK_FULL:
        return True
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC


class Storage(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def put_snippet(self, digest: str, body: str) -> str:
        """Store a snippet (if new); answer its id."""
        ...

    async def get_snippet(self, snippet_id: str) -> str | None: ...

    async def get_result(self, key: str) -> CachedResult | None: ...

    async def record_result(
        self, key: str, record: ResultRecord, limits: CacheLimits
    ) -> tuple[str, str]:
        """Add one run's evidence for ``key`` (see ``RESULT_UPSERT``); trim the cache
        to ``limits`` (the record's group to its quota of candidates, unstable markers
        to theirs, then candidates and least recently served entries); answer the
        entry's state and digest afterwards."""
        ...

    async def mark_served(self, key: str) -> None:
        """``key``'s confirmed entry was just served (at most one write a minute each)."""
        ...

    async def record_runs(self, rows: list[RunRow], keep_since: float) -> None:
        """Add runs' figures (backend/app/relay/figures.py); drop those before ``keep_since``."""
        ...

    async def run_rows(self, since: float) -> list[RunRow]:
        """The runs' figures recorded at or after ``since`` (every replica's)."""
        ...
