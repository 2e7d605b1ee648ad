"""The program's settings: one typed object, every field an environment variable.

Each setting is ``JAXPLAY_<NAME>`` (e.g. ``JAXPLAY_PORT=9000``) with a type, a default
and a description. The server's own are this class's fields; the sandbox's (the
jail's limits, how jails are made, the warm pool's sizes) are declared in
sandbox/assembly/settings.py and held here as ``settings.sandbox``, read from the same
environment, so one object carries them all. ``Settings()`` reads the environment
when it is called, never at import time; a command calls it once at start-up
(backend/cli/common.py, flags on top) and passes it down. settings_table.py lists
every setting (``declarations()``): ``jaxplay settings`` prints them with their values
and sources, and scripts/gen_settings_doc.py writes docs/settings.md from them.

Over 400 lines, for a reason: the class is the table of the server's settings, one
field each with its type, default and description (the words docs/settings.md and
every flag's help show), and its validators, which compare fields with each other.
Splitting the fields among classes would split the one settings object; what reads
the table (declarations, shown values, the docs' tables) is settings_table.py.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, InstanceOf, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sandbox.assembly.settings import OWNER, SandboxSettings
from sandbox.protocol.gpu_target_request import GPU_TARGETS
from sandbox.protocol.limits import NUMERICS_MAX_VALUES
from sandbox.protocol.sharding_request import TPU_TOPOLOGY_PATTERN

REPO = Path(__file__).resolve().parents[3]
DATABASE_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")
QUEUE_SCHEMES = ("redis://", "rediss://", "unix://")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JAXPLAY_", extra="ignore")

    # --- where it listens ----------------------------------------------------------
    host: str = Field(default="127.0.0.1", description="Address `jaxplay serve` binds to.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port `jaxplay serve` listens on.")
    public_url: str | None = Field(
        default=None,
        description="Base URL put in snippet links (e.g. `https://jaxplay.example`); "
        "by default the URL the request came to.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=lambda: ["localhost", "127.0.0.1", "[::1]"],
        description="The names a request's `Host` may carry, on every route (JSON list; "
        "each with any port, or `name:port` for that port only; `*`: any), besides "
        "`public_url`'s host and the address the server binds to (`host`, unless it "
        "is `0.0.0.0` or `::`). A request or WebSocket with another `Host` is refused "
        "(421, or an error and 1008), so a page on another site cannot reach the server "
        "by rebinding its DNS name to the server's address, nor through a proxy that "
        "forwards any `Host`. Add the names a health check or load balancer uses (a "
        "pod's address, a service name).",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Origins allowed to call the API from a browser (JSON list); "
        "the page itself is same-origin and needs none.",
    )
    ws_origins: list[str] = Field(
        default_factory=list,
        description="Origins besides the server's own (`public_url`'s, or without it the "
        "`Host` the request came to, one of `allowed_hosts`) and `cors_origins` whose "
        "pages may open the WebSocket (JSON list, e.g. "
        '`["https://a.example"]`); a browser from any other origin is refused (1008). '
        "Clients that send no `Origin` (scripts) are not browsers and are let in.",
    )
    frame_ancestors: str = Field(
        default="'none'",
        description="The page's CSP `frame-ancestors`: who may embed it in a frame "
        "(`'none'`, `'self'`, or origins separated by spaces).",
    )
    embed_frame_ancestors: str = Field(
        default="'self'",
        description="The embed view's (`/e/{id}`: a snippet and its outputs, read-only, "
        "made for iframes in docs and tutorials) CSP `frame-ancestors`: the sites that "
        "may frame it (`'self'`, `*`, or origins separated by spaces, like "
        "`https://docs.example.org`).",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description='Addresses or networks (JSON list: `["10.0.0.0/8"]`) of the proxies '
        "in front of the server whose `X-Forwarded-For` and `X-Forwarded-Proto` are "
        "believed; by default none: the client is the peer of the TCP connection.",
    )
    session_secret: SecretStr | None = Field(
        default=None,
        description="Key that signs the page's session cookie (its tenant). Replicas "
        "behind one load balancer must share it; unset, each server makes one at start "
        "(sessions then end when it restarts).",
    )
    session_max_age_s: float = Field(
        default=30 * 24 * 3600.0,
        gt=0,
        description="How long a page session (cookie) is honoured after it was issued.",
    )
    session_issue_burst: int = Field(
        default=8,
        ge=1,
        description="API sessions (`POST /api/v1/sessions`: a script's or `jaxplay run "
        "--server`'s kept process) one client address may be issued at once; then "
        "`session_issue_per_hour`, and a 429 with `Retry-After` beyond it.",
    )
    session_issue_per_hour: float = Field(
        default=12.0,
        gt=0,
        description="API sessions one client address is issued per hour after its "
        "`session_issue_burst` (a token bucket: an address holds at most the burst "
        "issued within the last burst / rate hours).",
    )
    frontend_dist: Path = Field(
        default=REPO / "frontend" / "dist",
        description="The built page (`frontend/dist`); a placeholder page is served while it does not exist.",
    )

    # --- storage -------------------------------------------------------------------
    database_url: str = Field(
        default="sqlite:///var/jaxplay.sqlite3",
        description="Where snippets and cached results live: `sqlite:///PATH` "
        "(relative to the working directory; WAL mode), `sqlite:///:memory:`, or "
        "`postgresql://USER:PASSWORD@HOST:5432/DB` (shared by replicas; migrated at start-up).",
    )

    # --- remote workers (Redis Streams) ----------------------------------------------
    queue_url: str | None = Field(
        default=None,
        description="`redis://HOST:6379/0` (or `rediss://`, `unix://`): run code on "
        "`jaxplay worker` machines through Redis Streams instead of a local pool "
        "(docs/deploy.md). Servers and workers must name the same Redis and prefix.",
    )
    queue_prefix: str = Field(
        default="jaxplay",
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="Prefix of every Redis key, so deployments can share one Redis.",
    )
    events_ttl_s: float = Field(
        default=300.0,
        gt=0,
        description="How long a run's events stay in Redis after it ended (a replica "
        "that did not submit it can still replay it: `GET /api/v1/runs/{id}/events`).",
    )
    worker_backend: Literal["cpu", "gpu", "tpu"] = Field(
        default="cpu", description="`jaxplay worker`: the backend it serves (`--backend`)."
    )
    worker_id: str | None = Field(
        default=None,
        description="`jaxplay worker`: its name in the queue; by default host-pid-random.",
    )
    worker_runs: int = Field(
        default=0,
        ge=0,
        description="`jaxplay worker`: runs it takes at once; 0: what its local pool "
        "can run (1 per GPU or TPU host).",
    )
    worker_devices: str | None = Field(
        default=None,
        description="`jaxplay worker --backend gpu` (or `tpu`): which devices its jails get "
        "(e.g. `0` or `0,1`); by default all of them.",
    )
    worker_driver_paths: list[str] = Field(
        default_factory=list,
        description="`jaxplay worker`: driver files or directories outside `/usr` to "
        "bind read-only into its jails (JSON list).",
    )
    worker_heartbeat_s: float = Field(
        default=2.0,
        gt=0,
        description="How often a worker renews its registration and its claim on its runs.",
    )
    worker_dead_after_s: float = Field(
        default=10.0,
        gt=0,
        description="A worker silent this long is dead: its runs that started end "
        "`killed` (saying so), those that had not are queued again. At least twice "
        "`worker_heartbeat_s`.",
    )
    worker_drain_s: float = Field(
        default=60.0,
        ge=0,
        description="On SIGTERM a worker takes no new run and lets its runs finish this "
        "long, then cancels them.",
    )

    # --- the pool ------------------------------------------------------------------
    pool: str = Field(
        default="auto",
        description="Which pool runs the code: `auto` (the jailed warm pool; without a "
        "usable jail, refuse unless `unsafe_no_jail`), `zygote` (the jailed warm pool), "
        "`subprocess` (one unjailed process per run: needs `unsafe_no_jail`), `fake` "
        "(runs nothing: tests), or `module:factory`.",
    )
    pool_capacity: int = Field(
        default=2,
        ge=1,
        description="Runs the `subprocess` pool executes at once (the `zygote` pool sizes "
        "itself: `JAXPLAY_POOL_RUNNING`, `JAXPLAY_POOL_SIZE`, ... in the sandbox docs).",
    )
    pool_options: dict[str, object] = Field(
        default_factory=dict,
        description="Extra keyword arguments for the pool's constructor (JSON object).",
    )
    probe_on_start: bool = Field(
        default=True,
        description="Run one tiny request at start-up to learn the pool's backend, devices "
        "and JAX version (for `/api/v1/backends` and the result cache).",
    )

    # --- JAX versions ----------------------------------------------------------------
    jax_versions: list[str] = Field(
        default_factory=list,
        description="JAX versions besides the default (the JAX of jaxplay's own environment) "
        "that `scripts/setup.sh` installs (`jaxplay versions add --configured`), as a JSON "
        'list: `["0.10.2", "0.4.38"]`. `jaxplay versions` lists what is offered.',
    )
    jax_versions_dir: Path = Field(
        default=REPO / ".jaxplay" / "versions",
        description="Where each JAX version's environment lives (`<dir>/<version>/`, about "
        "620 MB each). The jail user must be able to reach it (setup grants it).",
    )
    jax_version_idle_s: float = Field(
        default=600.0,
        gt=0,
        description="A non-default JAX version's warm pool is closed after this long without "
        "a run (the next run starts it again), so an old version costs nothing until asked for.",
    )
    across_diff_chars: int = Field(
        default=512 * 1024,
        ge=0,
        description="`/api/v1/across`: a step whose two texts are over this many characters "
        "together is not diffed (its `diff` says so): a crafted pair could keep difflib busy "
        "for minutes.",
    )
    across_diff_s: float = Field(
        default=10.0,
        gt=0,
        description="`/api/v1/across`: the seconds one request's diffs may take, in a child "
        "process off the event loop; outputs not diffed by then say so.",
    )

    # --- deviceless TPU compiles ----------------------------------------------------
    tpu_topologies: list[str] = Field(
        default_factory=list,
        description="The TPU topologies a run may name in `tpu_topology`, compiled for without "
        'a TPU (docs/api.md, "Deviceless TPU compiles"), as a JSON list: `["v5e:2x2", '
        "\"v5e:4x4\"]`. Empty: off. Every worker needs JAX's TPU extra (libtpu, under Google's "
        "terms: read them first), installed by `JAXPLAY_TPU_EXTRA=1 make setup`.",
    )

    # --- deviceless GPU compiles ----------------------------------------------------
    gpu_targets: list[str] = Field(
        default_factory=list,
        description="The NVIDIA GPUs a run may name in `gpu_target`, compiled for without a "
        f'GPU (docs/api.md, "Deviceless GPU compiles"), as a JSON list: `["h100"]`; known: '
        f"{', '.join(f'`{t}`' for t in GPU_TARGETS)}. Empty: off. Every worker needs JAX's "
        "CUDA plugin (about 490 MB), installed by `JAXPLAY_CUDA_EXTRA=1 make setup`.",
    )

    # --- admission -----------------------------------------------------------------
    max_queue: int = Field(
        # a waiting run costs the server its request and a coroutine (a few KiB); a
        # refused one loses its place in the fair line and comes back after its
        # Retry-After, so a short queue under many clients serves them by luck
        default=128,
        ge=0,
        description="Runs that may wait for a free worker, per backend; beyond it: 503. "
        "With `queue_url`, also the runs waiting in Redis for a backend's workers "
        "(all replicas together).",
    )
    max_runs_per_tenant: int = Field(
        default=2,
        ge=1,
        description="Runs one tenant (a page session, an API token, or a client address) "
        "may have running or queued at once; beyond it: 429. A WebSocket connection has "
        "one at a time.",
    )
    max_runs_per_client: int = Field(
        default=2,
        ge=1,
        description="Runs one client address (IPv6: its /56) may have running or queued "
        "at once, all its sessions and connections together; beyond it: 429. Known API "
        "tokens are held to `max_runs_per_tenant` instead.",
    )
    tenant_turn_s: float = Field(
        # the next tenant's process is a forked jail (~0.3 CPU-s, benchmarks/pool/
        # jail_start.py): a turn of 15 s spends ~1 % of two CPUs on the change
        default=15.0,
        gt=0,
        description="When every warm process of the pool (a zygote, one tenant each) "
        "belongs to a tenant using it and others wait for one, a tenant keeps its own "
        "this long, then its next run is refused (503) and it queues again behind them "
        "(docs/server.md, admission).",
    )
    tenant_idle_s: float = Field(
        default=10.0,
        gt=0,
        description="A tenant with no run for this long no longer holds a place in the "
        "pool: a waiting tenant may take its warm process.",
    )
    max_waiting_per_client: int = Field(
        default=2,
        ge=1,
        description="Places one client group (an address, IPv6 its /56, or an API token) "
        "may hold in the line for a warm process of a full pool, all its sessions "
        "together; its other sessions are told to come back without one. The groups in "
        "line are served by turns (docs/server.md, admission).",
    )
    max_websockets_per_client: int = Field(
        default=8,
        ge=1,
        description="WebSockets one client address (IPv6: its /56) may hold open; "
        "another is refused (an error, then close 1008).",
    )
    rate_limit_per_minute: float = Field(
        default=120.0,
        ge=0,
        description="Runs per minute per client address (or known API token); 0 turns the limit off.",
    )
    rate_limit_burst: int = Field(
        default=30,
        ge=1,
        description="Runs a client may send at once before the per-minute rate applies.",
    )
    api_tokens: list[str] = Field(
        default_factory=list,
        description="The API tokens this server issued (JSON list; e.g. from "
        "`python -c 'import secrets; print(secrets.token_urlsafe(24))'`). Each is a "
        "tenant with a rate limit of its own. A request with any other token is "
        "refused (401): an unknown token names no tenant.",
    )
    snippet_rate_per_minute: float = Field(
        default=20.0,
        ge=0,
        description="Snippets one client address may create per minute (bursts of "
        "`snippet_rate_burst`); beyond it: 429. 0 turns the limit off.",
    )
    snippet_rate_burst: int = Field(
        default=10, ge=1, description="Snippets a client may create at once."
    )
    max_snippet_bytes: int = Field(
        default=96 * 1024,
        ge=1024,
        description="Largest snippet (its canonical JSON); beyond it: 413.",
    )
    not_found_rate_per_minute: float = Field(
        default=60.0,
        ge=0,
        description="Lookups of snippets that do not exist one client address may make "
        "per minute (bursts of 20); beyond it: 429, so ids cannot be guessed by trying. "
        "0 turns the limit off.",
    )
    max_body_bytes: int = Field(
        default=512 * 1024,
        ge=1024,
        description="Largest request body or WebSocket message; beyond it: 413. "
        "(`code` itself is limited to 64 KiB.)",
    )
    max_timeout_s: float = Field(
        default=60.0,
        gt=0,
        le=600,
        description="Cap on a run's `timeout_s`; larger requests are capped.",
    )
    numerics_max_values: int = Field(
        default=NUMERICS_MAX_VALUES,
        ge=1,
        description="Cap on a run's `numerics_max_values`: the `numerics` output refuses, "
        "with a message, a program making more values than this (its float64 shadow holds "
        "a copy of each, about 3x the program's memory, and binds every equation three "
        "times); larger requests are capped.",
    )

    # --- named timeouts ------------------------------------------------------------
    queue_timeout_s: float = Field(
        default=20.0,
        ge=0,
        description="How long a run may wait in the queue for a worker before a 503. "
        "With `queue_url`, a run no worker took from Redis within it ends `error`.",
    )
    run_grace_s: float = Field(
        default=5.0,
        gt=0,
        description="How long past a run's own `timeout_s` the server waits for the pool's "
        "`done` before it ends the run itself (status `killed`).",
    )
    cancel_grace_s: float = Field(
        default=2.0,
        gt=0,
        description="How long a cancelled run may take to end before the server drops it.",
    )
    handshake_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="A WebSocket client must send its first message (`hello` or `run`) within this.",
    )
    idle_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description="A WebSocket with no run and no message for this long is closed (1001).",
    )
    session_timeout_s: float = Field(
        default=4 * 3600.0,
        gt=0,
        description="The longest a WebSocket connection may stay open (1001).",
    )
    client_stall_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="A client (WebSocket or NDJSON stream) that takes none of a run's "
        "events for this long is disconnected and its run cancelled; until then its run "
        "waits for it (the server never buffers more than an event or two for it).",
    )

    # --- result cache --------------------------------------------------------------
    cache_enabled: bool = Field(
        default=True,
        description="Serve repeated runs from the result cache: only answers that a "
        "pristine run (a fresh jail that never served a tenant) showed alike; never "
        "timings. A request can bypass it with `cache: false`.",
    )
    cache_max_entries: int = Field(
        default=10_000,
        ge=0,
        description="Cached results kept (unstable keys apart); candidates go first, "
        "then the confirmed answers least recently served.",
    )
    cache_max_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=0,
        description="Bytes the result cache may hold in the database; every write "
        "trims candidates, then the least recently served answers, beyond it.",
    )
    cache_candidates_per_group: int = Field(
        default=64,
        ge=1,
        description="Candidates (answers waiting for a pristine run) one client group "
        "(address, IPv6 /56, or API token) may have at once; its oldest go first.",
    )
    cache_max_unstable: int = Field(
        default=100_000,
        ge=0,
        description="Keys remembered as unstable (never served, always run; a row of "
        "~300 bytes each), besides `cache_max_entries`; the oldest are forgotten first.",
    )
    cache_join_wait_s: float = Field(
        default=10.0,
        ge=0,
        description="How long identical requests wait for the one already running (or "
        "for its pristine run, once that is running: never one still in line) before "
        "each runs on its own: a slow run cannot hold them.",
    )
    pristine_concurrency: int = Field(
        default=2,
        ge=0,
        description="Pristine runs (the cache's only confirmation) at once, each only "
        "while no tenant waits for a place; 0: none, so nothing is served from the cache. "
        "One client group holds at most one of them at a time, so with 2 or more one "
        "client flooding the line cannot keep another's key from starting.",
    )
    pristine_pool: str | None = Field(
        default=None,
        description="Where the server's pool cannot make pristine runs (Redis workers: a "
        "remote worker's word that a run was pristine is no evidence), a pool of the "
        "server's own for them: `zygote` (the jailed warm pool on the server's machine, "
        "the same image as the workers so their worker descriptions match), or `fake` "
        "(tests). Unset there: nothing is served from the cache across people.",
    )
    pristine_queue: int = Field(
        default=256,
        ge=1,
        description="Cache keys waiting for a pristine run, all client groups together; "
        "beyond it new asks are refused (asked again when their request runs again), "
        "never an older one dropped.",
    )
    pristine_per_group: int = Field(
        default=4,
        ge=1,
        description="Pristine runs one client group (address, IPv6 /56, or API token) "
        "may have waiting and running at once, asked by its reads, shares and "
        "contradicting runs; past it its asks are refused. The groups' lines are served "
        "in turn, one key each.",
    )
    pristine_budget_s: float = Field(
        default=60.0,
        gt=0,
        description="Pristine seconds a client group may spend at once: each pristine "
        "run's wall time is charged to the group whose ask started it; a group in debt "
        "asks for none until it is refilled (`pristine_refill_per_minute_s`).",
    )
    pristine_refill_per_minute_s: float = Field(
        default=20.0,
        ge=0,
        description="Pristine seconds a client group's budget regains a minute.",
    )
    cache_worker_ttl_s: float = Field(
        default=600.0,
        gt=0,
        description="How long what the server last saw of a backend's worker (its JAX "
        "version, device) keys the cache; after it, one run is made afresh to look again.",
    )
    cache_max_entry_bytes: int = Field(
        default=4 * 1024 * 1024, ge=0, description="Results larger than this are not cached."
    )

    # --- agents (MCP), bug reports, notebooks, public figures -------------------------
    mcp_enabled: bool = Field(
        default=True,
        description='Serve the MCP endpoint `/mcp` (Streamable HTTP; docs/api.md, "MCP"). '
        "Its tools call the REST API as the caller, under the same limits.",
    )
    mcp_output_chars: int = Field(
        default=20_000,
        ge=200,
        le=1_000_000,
        description="Characters of each output (a jaxpr, an HLO, a diff) an MCP tool "
        "answers; a longer one is cut, with its total and `truncated: true`.",
    )
    report_hlo_chars: int = Field(
        default=20_000,
        ge=1000,
        le=60_000,
        description="Characters of the HLO a bug report (`/api/v1/snippets/{id}/report.md`) "
        "shows inline (GitHub takes 65 536 in an issue); the whole HLO is its "
        "`report.hlo.txt`, to attach.",
    )
    public_stats: bool = Field(
        default=True,
        description="Publish the service's figures: `GET /api/v1/stats` and the `/stats` "
        "page (runs, cache hit rate, first-output latency per JAX version; no code or "
        "identity is kept for them). Off: both answer 404.",
    )
    stats_cache_s: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="The public figures are made at most once in this many seconds, "
        "whoever asks how often.",
    )

    # --- metrics -------------------------------------------------------------------
    metrics_public: bool = Field(
        default=False,
        description="Also serve `GET /metrics` on the public port (off: a 404 there). By "
        "default it is served only on `metrics_port`, when that is set.",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Also serve `GET /metrics` (and nothing else) on this port of "
        "`metrics_host`, for a scraper on a private network.",
    )
    metrics_host: str = Field(
        default="127.0.0.1", description="Address the `metrics_port` listener binds to."
    )

    # --- logs ----------------------------------------------------------------------
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Least severe log level written."
    )
    log_format: Literal["json", "text"] = Field(
        default="json", description="`json`: one JSON object per line; `text`: for a terminal."
    )

    # --- the sandbox: its settings are declared in sandbox/assembly/settings.py -----------
    sandbox: InstanceOf[SandboxSettings] = Field(
        default_factory=SandboxSettings,
        description="The sandbox's settings (the jail's limits, how jails are made, the "
        "warm pool's sizes), each its own `JAXPLAY_*` variable (sandbox/assembly/settings.py).",
    )

    @model_validator(mode="before")
    @classmethod
    def _sandbox_part(cls, data: Any) -> Any:
        """The sandbox's settings from the same environment, and any given by name
        (``Settings(unsafe_no_jail=True)``, a flag) on top."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        given = {k: data.pop(k) for k in list(data) if k in OWNER}
        given = {k: v for k, v in given.items() if v is not None}
        base = data.get("sandbox")
        if base is None:
            base = SandboxSettings.read(overrides=given)
        elif given:
            base = base.replace(**given)
        data["sandbox"] = base
        return data

    @property
    def unsafe_no_jail(self) -> bool:
        return self.sandbox.jail.unsafe_no_jail

    @field_validator("tpu_topologies")
    @classmethod
    def _topology_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.match(TPU_TOPOLOGY_PATTERN, name):
                raise ValueError(
                    f"tpu_topologies: {name!r} is not a TPU topology name as libtpu spells "
                    "one (`v5e:2x2`, `v5p:2x2x1`)"
                )
        return names

    @field_validator("gpu_targets")
    @classmethod
    def _gpu_target_names(cls, names: list[str]) -> list[str]:
        unknown = sorted(set(names) - set(GPU_TARGETS))
        if unknown:
            raise ValueError(
                f"gpu_targets: {unknown} are not GPU targets; known: {list(GPU_TARGETS)}"
            )
        return names

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, proxies: list[str]) -> list[str]:
        for proxy in proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(
                    f"trusted_proxies: {proxy!r} is not an address or a network (like 10.0.0.0/8)"
                )
        return proxies

    @model_validator(mode="after")
    def _refuse_unsupported(self) -> Settings:
        if not self.database_url.startswith(DATABASE_SCHEMES):
            raise ValueError(
                "database_url: use sqlite:///PATH or postgresql://USER:PASSWORD@HOST:5432/DB"
            )
        if self.queue_url and not self.queue_url.startswith(QUEUE_SCHEMES):
            raise ValueError("queue_url: use redis://HOST:6379/0 (or rediss://, unix://)")
        if self.worker_dead_after_s < 2 * self.worker_heartbeat_s:
            raise ValueError("worker_dead_after_s must be at least twice worker_heartbeat_s")
        return self
