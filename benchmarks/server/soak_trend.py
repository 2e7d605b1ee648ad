"""The soak's samples and its verdict on them (benchmarks/server/soak.py).

Every ``sample_s`` the soak reads what could grow without bound over hours: the
server's memory and open descriptors, the processes under it and the jails alive
(from ``/proc``, whatever the pool says of itself), the pool's own figures, the queue, open
WebSockets and runs in flight (``/metrics``), PostgreSQL's connections, size and rows,
and the answers' p50/p95 per route since the sample before.

A quantity **passes** when the straight line fitted (least squares) to its samples
over the last two thirds of the soak does not rise by more than noise: its rise over
that window is not more than ``3 x`` its standard error, or is under the quantity's
floor (an RSS that rises 2 MB in 30 minutes is no leak anyone would act on). Falling
is never a failure. The first third is left out: the pool fills, caches warm, the
database makes its first pages.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from dataclasses import dataclass, field

import httpx

from benchmarks.support import procfs
from benchmarks.support.stats import percentile

#: answers of a route a sample window needs for its p50/p95 to be a point of the trend
MIN_ANSWERS = 5
#: the pool's figures that count events since it started (their rise is no leak)
POOL_COUNTERS = frozenset(
    {"runs", "reused", "moved", "pristine_runs", "single_use_runs", "retired", "identity_check"}
)


# --- the fit --------------------------------------------------------------------------


@dataclass(frozen=True)
class Trend:
    name: str
    n: int
    first: float
    last: float
    rise: float  # the fitted line's rise over the window
    stderr: float  # the standard error of that rise
    floor: float
    ok: bool

    def line(self) -> str:
        verdict = "ok" if self.ok else "GROWS"
        return (
            f"{self.name:44} {verdict:5} n={self.n:<3} {_num(self.first):>10} -> "
            f"{_num(self.last):>10}  fitted rise {_num(self.rise):>9} "
            f"(noise {_num(3 * self.stderr)}, floor {_num(self.floor)})"
        )


def _num(x: float) -> str:
    if math.isnan(x):
        return "nan"
    return f"{x:.4g}" if abs(x) < 1e5 else f"{x:.3e}"


def fitted_rise(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(rise, its standard error) of the least-squares line through ``points``
    (time, value), over the span of their times."""
    n = len(points)
    ts = [t for t, _ in points]
    ys = [y for _, y in points]
    t_mean, y_mean = sum(ts) / n, sum(ys) / n
    sxx = sum((t - t_mean) ** 2 for t in ts)
    if n < 3 or sxx == 0:
        return 0.0, math.inf
    slope = sum((t - t_mean) * (y - y_mean) for t, y in points) / sxx
    residual = sum((y - (y_mean + slope * (t - t_mean))) ** 2 for t, y in points)
    slope_se = math.sqrt(residual / (n - 2) / sxx)
    span = max(ts) - min(ts)
    return slope * span, slope_se * span


def judge(name: str, points: list[tuple[float, float]], floor: float, start: float) -> Trend:
    """The verdict on one quantity, over its samples at or after ``start``."""
    window = [(t, y) for t, y in points if t >= start and not math.isnan(y)]
    if len(window) < 3:  # too short to say: reported, not failed
        first = window[0][1] if window else math.nan
        last = window[-1][1] if window else math.nan
        return Trend(name, len(window), first, last, math.nan, math.nan, floor, True)
    rise, stderr = fitted_rise(window)
    ok = rise <= max(floor, 3 * stderr)
    return Trend(name, len(window), window[0][1], window[-1][1], rise, stderr, floor, ok)


def floor_for(name: str, values: list[float]) -> float:
    """What rise over the window is too small to matter, by the kind of quantity."""
    typical = abs(percentile(values, 0.5)) if values else 0.0
    if name.startswith("server.rss_mb"):
        return 8.0
    if name.startswith("server.fds") or name.startswith("processes."):
        return 4.0
    if name.startswith("jails."):
        return 1.5
    if name.startswith(("pool.", "metrics.", "queue.", "pg.connections")):
        return 1.5
    if name.startswith("latency."):  # ms: half the typical, at least 20 ms (the
        # neighbours on a shared machine move it too; a slowdown that grows without
        # bound passes any such floor within hours)
        return max(20.0, 0.5 * typical)
    if name.startswith("cpu."):  # a fifth of the typical: the neighbours move it too
        return max(0.02 if "share" in name else 1.0, 0.2 * typical)
    if name.startswith("pg.bytes_per_row"):
        return max(64.0, 0.1 * typical)
    return max(1.0, 0.1 * typical)


# --- the samples ----------------------------------------------------------------------


@dataclass
class Samples:
    started: float = field(default_factory=time.monotonic)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    #: quantities reported but not judged (they grow by design: stored snippets, runs)
    reported: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def add(self, name: str, value: float | None, *, judged: bool = True) -> None:
        if value is None:
            return
        at = time.monotonic() - self.started
        (self.series if judged else self.reported).setdefault(name, []).append((at, value))

    def verdicts(self, duration_s: float, settle_s: dict[str, float] | None = None) -> list[Trend]:
        """Each judged quantity's verdict over the last two thirds, or from a later
        time for a quantity whose steady state takes longer by design (``settle_s``,
        by name prefix: Redis keeps every run's events ``events_ttl_s``, so its memory
        rises for that long)."""
        verdicts = []
        for name, points in sorted(self.series.items()):
            start = duration_s / 3
            for prefix, settle in (settle_s or {}).items():
                if name.startswith(prefix):
                    start = max(start, settle)
            verdicts.append(judge(name, points, floor_for(name, [y for _, y in points]), start))
        return verdicts


def process_kinds(descendants: dict[int, tuple[int, str]]) -> dict[str, int]:
    """Processes under the server, counted from /proc whatever the pool says of
    itself: the server's own helpers (its uid: launchers, a jail template, diffs),
    the jailed ones (any other uid), and jails (each runs as a uid of its own)."""
    own = os.getuid()
    uids: list[int] = []
    for pid in descendants:
        with contextlib.suppress(OSError, IndexError, ValueError):
            uids.append(procfs.status(pid, ("Uid",))["Uid"])  # the real uid
    jailed = [u for u in uids if u != own]
    return {"host": len(uids) - len(jailed), "jailed": len(jailed), "jails": len(set(jailed))}


_METRIC = re.compile(r"^(jaxplay_[a-z_]+)(?:\{([^}]*)\})? ([-+0-9.eE]+|NaN)$")


def metric_gauges(url: str) -> dict[str, float]:
    """The gauges worth watching on /metrics: the pool's figures (counters left
    out), queue lengths, open WebSockets, runs in flight."""
    found: dict[str, float] = {}
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        m = _METRIC.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        label = labels.split('"')[1] if '"' in labels else ""
        if name == "jaxplay_pool" and label not in POOL_COUNTERS:
            found[f"pool.{label}"] = value
        elif name == "jaxplay_queue_length":
            found[f"queue.{label or 'all'}"] = value
        elif name in ("jaxplay_websocket_connections", "jaxplay_runs_in_flight"):
            found[f"metrics.{name.removeprefix('jaxplay_')}"] = value
    return found


def postgres_figures(admin_url: str, database: str) -> dict[str, float] | None:
    """Connections to the server's database (this query's own left out), its size,
    and its rows; None while PostgreSQL cannot be reached (a fault step)."""
    import psycopg

    try:
        with psycopg.connect(admin_url, connect_timeout=3, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE pid <> pg_backend_pid()), pg_database_size(%s)"
                " FROM pg_stat_activity WHERE datname = %s",
                (database, database),
            ).fetchone()
        with psycopg.connect(
            admin_url.rsplit("/", 1)[0] + "/" + database, connect_timeout=3, autocommit=True
        ) as conn:
            rows = {
                table: float(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
                for table in ("snippets", "cache_results", "run_stats")
            }
    except psycopg.Error:
        return None
    assert row is not None
    # the server's connections only: the soak's own are to another database, or closed
    figures = {"pg.connections": float(row[0]), "pg.size_mb": row[1] / 2**20}
    figures.update({f"pg.rows.{k}": v for k, v in rows.items()})
    figures["pg.bytes_per_row"] = row[1] / max(1.0, sum(rows.values()))
    return figures


def take_sample(
    samples: Samples,
    url: str,
    pid: int,
    descendants: dict[int, tuple[int, str]],
    pg: tuple[str, str],
    latencies: dict[str, list[float]],
) -> dict[str, float]:
    """One sample of everything; what it read (for the progress line)."""
    seen: dict[str, float] = {}

    def put(name: str, value: float | None, judged: bool = True) -> None:
        samples.add(name, value, judged=judged)
        if value is not None:
            seen[name] = value

    status = procfs.status(pid)
    put("server.rss_mb", status.get("VmRSS", 0) / 1024)
    put("server.threads", float(status.get("Threads", 0)))
    put("server.fds", float(len(os.listdir(f"/proc/{pid}/fd"))))
    for kind, count in process_kinds(descendants).items():
        put("jails.alive" if kind == "jails" else f"processes.{kind}", float(count))
    with contextlib.suppress(httpx.HTTPError):
        for name, value in metric_gauges(url).items():
            put(name, value)
    figures = postgres_figures(*pg)
    if figures is not None:
        for name, value in figures.items():
            grows = name in ("pg.size_mb",) or name.startswith("pg.rows.")
            put(name, value, judged=not grows)
    for route, values in sorted(latencies.items()):
        # a percentile of one or two answers is one answer's time, not the route's:
        # a window with fewer than MIN_ANSWERS adds no point (the route's pace is low)
        if len(values) >= MIN_ANSWERS:
            put(f"latency.{route}.p50_ms", percentile(values, 0.5) * 1000)
            put(f"latency.{route}.p95_ms", percentile(values, 0.95) * 1000)
    return seen
