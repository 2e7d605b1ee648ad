"""Prometheus metrics, in a registry of the app's own (none at import time).

Nothing a client or a run says can add a series or set a value: every label comes
from a fixed set (anything else is counted as ``other``), and every value is one
the server measured itself. So the page stays the same size whatever is sent, and
renders in a few milliseconds (benchmarks/server/event_flood.py measures it under a flood).
"""

from __future__ import annotations

import asyncio
import math
import re
import resource
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sandbox.protocol import DONE_STATUSES

_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: the label values a series may have; anything else is "other"
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
RUN_STATUSES = frozenset({*DONE_STATUSES, "abandoned"})
#: a pool's figures (Pool.stats()): names of this shape, this many at most
_FIGURE = re.compile(r"^[a-z_]{1,32}$")
_MAX_FIGURES = 32


def _fixed(value: str, allowed: frozenset[str]) -> str:
    return value if value in allowed else "other"


class _PoolCollector(Collector):
    """Samples the pool's own numbers (``Pool.stats()``) at scrape time."""

    def __init__(self, stats: Callable[[], dict[str, Any]]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "jaxplay_pool", "The pool's own figures (Pool.stats()).", labels=["figure"]
        )
        try:
            stats = self._stats()
        except Exception:
            stats = {}
        figures = [
            (key, float(value))
            for key, value in stats.items()
            if isinstance(key, str)
            and _FIGURE.match(key)
            and isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
        ]
        for key, value in figures[:_MAX_FIGURES]:
            family.add_metric([key], value)
        yield family


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._pool_collector: _PoolCollector | None = None
        r = self.registry
        ProcessCollector(registry=r)
        self.runs = Counter(
            "jaxplay_runs",
            "Runs that ended, by status and whether the cache answered.",
            ["status", "cached"],
            registry=r,
        )
        self.rejected = Counter(
            "jaxplay_rejected_runs",
            "Runs (and WebSockets, snippets, lookups) refused, by reason.",
            ["reason"],
            registry=r,
        )
        self.cache = Counter(
            "jaxplay_cache_lookups",
            "Result cache lookups: hit, miss, joined, bypass, unstable.",
            ["result"],
            registry=r,
        )
        self.pristine = Counter(
            "jaxplay_pristine_runs",
            "Pristine runs (the cache's only confirmation) by what they did to their "
            "entry: confirmed, unstable (it disagreed with another pristine run's), candidate "
            "(it disagreed with a tenant's candidate, or that had been trimmed: its own "
            "output is the candidate, and a second pristine run decides), "
            "no_evidence (failed, or on another worker), failed.",
            ["outcome"],
            registry=r,
        )
        self.pristine_asks = Counter(
            "jaxplay_pristine_asks",
            "Asks for a pristine run: queued (waiting, running, or joined to one), or "
            "refused: group_cap, group_budget, full (backend/app/trust/pristine_lines.py).",
            ["result"],
            registry=r,
        )
        self.pristine_line = Gauge(
            "jaxplay_pristine_line",
            "Keys waiting for a pristine run, and pristine runs running.",
            ["state"],
            registry=r,
        )
        self.queue = Gauge(
            "jaxplay_queue_length",
            "Runs waiting for a worker, per backend.",
            ["backend"],
            registry=r,
        )
        self.in_flight = Gauge("jaxplay_runs_in_flight", "Runs executing now.", registry=r)
        self.stage = Histogram(
            "jaxplay_stage_seconds",
            "Time of each stage of a run as the worker reports it.",
            ["stage"],
            buckets=_LATENCY,
            registry=r,
        )
        self.run_seconds = Histogram(
            "jaxplay_run_seconds",
            "Time from admission to `done`, as the server sees it.",
            ["cached"],
            buckets=_LATENCY,
            registry=r,
        )
        self.first_event = Histogram(
            "jaxplay_first_result_seconds",
            "Time from admission to the first result event (jaxpr, ...).",
            buckets=_LATENCY,
            registry=r,
        )
        self.queue_wait = Histogram(
            "jaxplay_queue_wait_seconds",
            "Time a run waited for a worker.",
            buckets=_LATENCY,
            registry=r,
        )
        self.refused_events = Counter(
            "jaxplay_refused_events",
            "Event lines refused: malformed, or not events jaxplay would send (user code "
            "writing to the event pipe).",
            registry=r,
        )
        self.render_seconds = Gauge(
            "jaxplay_metrics_render_seconds",
            "How long the previous /metrics page took to render.",
            registry=r,
        )
        self.ws_connections = Gauge(
            "jaxplay_websocket_connections", "Open WebSocket connections.", registry=r
        )
        self.http_requests = Counter(
            "jaxplay_http_requests",
            "HTTP requests, by route template and status.",
            ["method", "route", "status"],
            registry=r,
        )
        self.http_seconds = Histogram(
            "jaxplay_http_request_seconds",
            "HTTP request time (to the end of the body).",
            ["route"],
            buckets=_LATENCY,
            registry=r,
        )
        jax = Gauge(
            "jaxplay_server_imports_jax",
            "1 if the server process imported JAX (it must not).",
            registry=r,
        )
        jax.set_function(lambda: float("jax" in sys.modules))
        peak = Gauge(
            "jaxplay_server_peak_rss_bytes",
            "Peak resident memory of the server process.",
            registry=r,
        )
        peak.set_function(lambda: float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))

    def watch_pool(self, stats: Callable[[], dict[str, Any]]) -> None:
        """Sample this pool at scrape time (replacing one watched before: an app
        whose lifespan runs again)."""
        if self._pool_collector is not None:
            self.registry.unregister(self._pool_collector)
        self._pool_collector = _PoolCollector(stats)
        self.registry.register(self._pool_collector)

    def http_request(self, method: str, route: str, status: int, seconds: float) -> None:
        method = _fixed(method, HTTP_METHODS)
        self.http_requests.labels(
            method, route, str(status) if 100 <= status < 600 else "other"
        ).inc()
        self.http_seconds.labels(route).observe(seconds)

    def run_ended(self, status: str, cached: bool, seconds: float) -> None:
        label = "true" if cached else "false"
        self._child(self.runs, _fixed(status, RUN_STATUSES), label).inc()
        self._child(self.run_seconds, label).observe(seconds)

    def stage_ended(self, stage: str, seconds: float) -> None:
        """A run's stage (a validated event's: one of a fixed set) took ``seconds``."""
        self._child(self.stage, stage).observe(seconds)

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, kept once made (a run asks for the same few many
        times; a series still appears only when first used)."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def render(self) -> bytes:
        started = time.perf_counter()
        page = generate_latest(self.registry)
        self.render_seconds.set(time.perf_counter() - started)
        return page


async def serve_metrics(metrics: Metrics, host: str, port: int) -> asyncio.Server:
    """A listener of its own for ``GET /metrics`` (``metrics_port``): a scraper on a
    private network reads it there while the public port need not serve it. It
    answers that one path; anything else is a 404, a slow or long request is dropped."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(5):
                head = await reader.readuntil(b"\r\n\r\n")
            method, path = [*head.split(b" ", 2), b"", b""][:2]
            if method in (b"GET", b"HEAD") and path.split(b"?", 1)[0] == b"/metrics":
                body, status = metrics.render(), b"200 OK"
            else:
                body, status = b"not found\n", b"404 Not Found"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: " + CONTENT_TYPE_LATEST.encode()
                + b"\r\nContent-Length: " + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n" + (body if method != b"HEAD" else b"")
            )  # fmt: skip
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(answer, host, port, limit=8192)
