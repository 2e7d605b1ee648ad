"""Prometheus metrics, in a registry of the app's own (none at import time)."""

from __future__ import annotations

import resource
import sys
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


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
        for key, value in stats.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                family.add_metric([str(key)], float(value))
        yield family


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
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
            "Runs refused before they started, by reason.",
            ["reason"],
            registry=r,
        )
        self.cache = Counter(
            "jaxplay_cache_lookups",
            "Result cache lookups: hit, miss, bypass, uncacheable.",
            ["result"],
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
        self.http_requests.labels(method, route, str(status)).inc()
        self.http_seconds.labels(route).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
