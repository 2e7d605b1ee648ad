"""The ``/stats`` page: the public figures (backend/app/relay/figures.py) as HTML, and the
last day drawn as an SVG made on the server (no script: the page's CSP holds as it is).
Everything written into it is a number or a JAX version, HTML-escaped all the same."""

from __future__ import annotations

import html
import time
from typing import Any

WIDTH, HEIGHT, PAD = 720, 220, 36


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} ms"


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def plot(bars: list[dict[str, Any]]) -> str:
    """Runs per hour (bars; the cache's answers darker) and the first-output p50 (a line,
    its own scale on the right), oldest hour on the left."""
    top_runs = max([b["runs"] for b in bars] + [1])
    top_ms = max([b["p50_ms"] or 0 for b in bars] + [1.0])
    inner_w, inner_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    step = inner_w / len(bars)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" data-testid="stats-plot" '
        'aria-label="Runs per hour over the last day, and the first-output latency p50">',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" class="axis"/>',
        f'<text x="{PAD}" y="{PAD - 10}" class="label">runs / hour (max {top_runs})</text>',
        f'<text x="{WIDTH - PAD}" y="{PAD - 10}" class="label" text-anchor="end">'
        f"p50 first output (max {top_ms:,.0f} ms)</text>",
    ]
    points = []
    for i, bar in enumerate(bars):
        x = PAD + i * step
        h = inner_h * bar["runs"] / top_runs
        hits = inner_h * bar["cache_hits"] / top_runs
        ago = 24 - i
        label = (
            f"{ago} h ago: {bar['runs']} runs, {bar['cache_hits']} from the cache, "
            f"p50 {_ms(bar['p50_ms'])}, p95 {_ms(bar['p95_ms'])}"
        )
        parts.append(
            f'<g data-runs="{bar["runs"]}"><title>{html.escape(label)}</title>'
            f'<rect x="{x + 1:.1f}" y="{HEIGHT - PAD - h:.1f}" width="{step - 2:.1f}" '
            f'height="{h:.1f}" class="run"/>'
            f'<rect x="{x + 1:.1f}" y="{HEIGHT - PAD - hits:.1f}" width="{step - 2:.1f}" '
            f'height="{hits:.1f}" class="hit"/></g>'
        )
        if bar["p50_ms"] is not None:
            y = HEIGHT - PAD - inner_h * bar["p50_ms"] / top_ms
            points.append(f"{x + step / 2:.1f},{y:.1f}")
            parts.append(f'<circle cx="{x + step / 2:.1f}" cy="{y:.1f}" r="3" class="p50-dot"/>')
        if i % 6 == 0:
            parts.append(f'<text x="{x:.1f}" y="{HEIGHT - PAD + 16}" class="label">-{ago} h</text>')
    if points:
        parts.append(f'<polyline points="{" ".join(points)}" class="p50"/>')
    parts.append(f'<text x="{WIDTH - PAD}" y="{HEIGHT - PAD + 16}" class="label" '
                 'text-anchor="end">now</text></svg>')  # fmt: skip
    return "".join(parts)


def _rows(window: dict[str, Any]) -> str:
    out = []
    for version, s in [("all", window), *window["per_version"].items()]:
        f = s["first_output_ms"]
        out.append(
            f"<tr><th scope=row>{html.escape(version)}</th><td>{s['runs']}</td>"
            f"<td>{_rate(s['cache_hit_rate'])}</td><td>{_ms(f['p50'])}</td>"
            f"<td>{_ms(f['p95'])}</td></tr>"
        )
    return "".join(out)


def page(figures: dict[str, Any]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(figures["generated_at"]))
    tables = []
    for name, title in (("hour", "The last hour"), ("day", "The last day")):
        tables.append(
            f'<h2>{title}</h2><table data-testid="stats-{name}"><thead><tr><th>JAX</th>'
            "<th>runs</th><th>cache hit rate</th><th>first output p50</th>"
            f"<th>p95</th></tr></thead><tbody>{_rows(figures[name])}</tbody></table>"
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>jaxplay: public figures</title>
<style>
body {{ font: 15px/1.5 system-ui, sans-serif; max-width: 780px; margin: 2em auto; padding: 0 1em;
       color: #1d2330; background: #fff; }}
table {{ border-collapse: collapse; margin: .5em 0 1.5em; }}
th, td {{ padding: .25em .9em; border-bottom: 1px solid #dde; text-align: right; }}
th:first-child {{ text-align: left; }}
svg .run {{ fill: #9db8e8; }} svg .hit {{ fill: #3a6fc9; }}
svg .p50 {{ fill: none; stroke: #d9480f; stroke-width: 2; }} svg .p50-dot {{ fill: #d9480f; }}
svg .axis {{ stroke: #888; }} svg .label {{ font-size: 11px; fill: #555; }}
p.note {{ color: #555; font-size: 13px; }}
</style></head><body>
<h1>jaxplay, in figures</h1>
<p>Runs on this service, from its own records (updated {html.escape(when)}). The cache's hit
rate is the share of runs answered from the result cache; first output is the time from the
server receiving a run to its first IR (jaxpr, StableHLO or HLO), as the server sees it.
Nobody's code or identity is kept for these figures.</p>
{"".join(tables)}
<h2>The last day, by the hour</h2>
{plot(figures["day_by_hour"])}
<p class="note">Bars: runs per hour (dark: answered from the cache). Line: first-output p50.
The same figures as JSON: <a href="/api/v1/stats">/api/v1/stats</a>.</p>
</body></html>
"""
