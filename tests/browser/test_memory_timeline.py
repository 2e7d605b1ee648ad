"""The memory timeline (issue 36) in a real browser: the menu's example (jit(grad) of
a 3-layer MLP, against the same under checkpoint(nothing_saveable)) draws a timeline
per pipeline whose peak step, bytes and values are those XLA's own live-range dump
names for plain JAX compiled in a fresh process; hovering a band lights its code line.
And the Profile, Asm and Kernels panes' hover lights the editor's line too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import open_page
from .test_page import show_tab, wait_done

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "examples" / "memory_timeline.py").read_text()
MENU = {e["id"]: e for e in json.loads((ROOT / "examples" / "menu.json").read_text())["examples"]}

#: plain JAX in a fresh process: the example's jit(grad(loss)) (under a checkpoint
#: policy, or none), compiled with XLA's dump on; the dump's peak step and values
REFERENCE = r"""
import glob, json, os, re, sys
import jax, jax.numpy as jnp
namespace = {}
exec(compile(sys.argv[1], "snippet.py", "exec"), namespace)
loss = namespace["loss"]
if sys.argv[2] != "-":
    loss = jax.checkpoint(loss, policy=getattr(jax.checkpoint_policies, sys.argv[2]))
params, x = eval(sys.argv[3], {"jnp": jnp})
jax.jit(jax.grad(loss)).lower(params, x).compile()
path, = glob.glob(os.path.join(sys.argv[4], "*jit_loss*after_optimizations-live-range.txt"))
peak = re.search(r"Live ranges at (\d+) \(peak\):\n((?:    .*\n?)*)", open(path).read())
values = re.findall(r"^    \S+?: (\d+) bytes", peak.group(2), re.M)
print(json.dumps({"step": int(peak.group(1)), "values": sorted(map(int, values))}))
"""


def _xla_says(policy: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={folder}", "JAX_PLATFORMS": "cpu"}
        args = MENU["memory-timeline"]["args"]
        out = subprocess.run(
            [sys.executable, "-c", REFERENCE, EXAMPLE, policy, args, folder],
            env=env, capture_output=True, text=True, check=True, timeout=300,
        )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def _editor_lit(page: Any, line: str) -> None:
    page.wait_for_selector(f"[data-testid=code] .cm-line.cm-linked[data-src-line='{line}']")


def test_the_memory_timeline_is_xlas_and_its_bands_link_lines(page: Any) -> None:
    page.select_option("#examples", "memory-timeline")
    assert wait_done(page) == "ok", page.inner_text("#panel-errors")
    show_tab(page, "memory")
    page.wait_for_selector("[data-testid=memory-timeline]")
    sections = page.locator("#panel-memory section.memory-pipeline")
    assert sections.count() == 2  # A (no checkpoint) and B (nothing_saveable)
    for i, policy in enumerate(["-", "nothing_saveable"]):
        section = sections.nth(i)
        xla = _xla_says(policy)
        assert section.locator("[data-testid=memory-peak-step]").inner_text() == str(xla["step"])
        shown = section.locator("[data-testid=memory-timeline-peak]").get_attribute("data-bytes")
        assert shown == str(sum(xla["values"]))
        rows = section.locator("table.memory-at-peak tbody tr")
        assert sorted(int(r.get_attribute("data-bytes") or -1) for r in rows.all()) == xla["values"]
    # hover a band of a code line: that line lights up in the editor
    chart = sections.nth(0).locator("[data-testid=memory-timeline]")
    line = chart.locator("path.mem-band[data-line]:not([data-line=''])").first.get_attribute(
        "data-line"
    )
    assert line is not None and re.fullmatch(r"\d+", line)
    # the Memory tab's code lines are banded in the editor (what a hover lights)
    page.wait_for_selector(f"[data-testid=code] .cm-line.cm-band[data-src-line='{line}']")
    _hover_band_until_lit(page, chart, line)
    page.mouse.move(0, 0)


def _hover_band_until_lit(page: Any, chart: Any, line: str) -> None:
    """Move the pointer onto the band of ``line`` (its thickest point, read again each
    try: the page may still be settling its layout under load, and a single mousemove
    that landed before a shift says nothing) until the editor lights the line."""
    under = ""
    for _ in range(5):
        band = chart.locator(f"path.mem-band[data-line='{line}']").first
        x, y = _thickest_point(band.get_attribute("d") or "")
        box = chart.bounding_box()
        scale = box["width"] / 600  # the chart's viewBox is 600 wide
        px, py = box["x"] + x * scale, box["y"] + y * scale
        page.mouse.move(0, 0)
        page.mouse.move(px, py)
        try:
            page.wait_for_selector(
                f"[data-testid=code] .cm-line.cm-linked[data-src-line='{line}']", timeout=3_000
            )
            return
        except Exception:
            under = page.evaluate(
                "([x, y]) => { const e = document.elementFromPoint(x, y);"
                " return e ? e.outerHTML.slice(0, 200) : 'nothing'; }",
                [px, py],
            )
    raise AssertionError(f"hovering line {line}'s band never lit it; under the pointer: {under}")


def _thickest_point(d: str) -> tuple[float, float]:
    """The middle of a band's path where it is thickest: its top edge runs left to
    right, its bottom edge back, one vertex per point."""
    vertices = [tuple(map(float, p.split(","))) for p in d[1:-1].split("L")]
    n = len(vertices) // 2
    top, bottom = vertices[:n], vertices[n:][::-1]
    i = max(range(n), key=lambda k: bottom[k][1] - top[k][1])
    return top[i][0] if 0 < i < n - 1 else top[i][0] + (1 if i == 0 else -1), (
        top[i][1] + bottom[i][1]
    ) / 2


def test_profile_asm_and_kernels_hover_lights_the_code_line(page: Any) -> None:
    page.select_option("#examples", "memory-timeline")
    assert wait_done(page) == "ok"
    page.click("[data-testid=compute] summary")
    for name in ("asm", "profile"):
        page.check(f"#out-{name}")
    page.click("[data-testid=compute] summary")
    page.click("#run")
    assert wait_done(page, timeout_ms=120_000) == "ok", page.inner_text("#panel-errors")

    show_tab(page, "profile")
    page.wait_for_selector("#panel-profile table.profile tbody tr")
    rows = page.locator("#panel-profile table.profile tbody tr").all()
    row = next(r for r in rows if r.locator("td:nth-child(6)").inner_text().strip().isdigit())
    line = row.locator("td:nth-child(6)").inner_text().strip()
    row.hover()
    _editor_lit(page, line)
    page.mouse.move(0, 0)

    show_tab(page, "asm")
    kernel = page.locator("#panel-asm .asm-kernel:has(.asm-meta:text-matches('line'))").first
    meta = kernel.locator(".asm-meta").inner_text()
    first = re.search(r"lines? (\d+)", meta).group(1)  # type: ignore[union-attr]
    kernel.hover()
    _editor_lit(page, first)
    page.mouse.move(0, 0)

    page.select_option("#examples", "pallas-add")
    assert wait_done(page) == "ok"
    show_tab(page, "kernels")
    span = page.locator("#panel-kernels pre.kernel-text span.linked").first
    line = span.get_attribute("data-line") or ""
    span.hover()
    _editor_lit(page, line)


#: the chunk of the panes loaded on first use (frontend/src/panes/later.ts): Memory's among them
LATER_CHUNK = "**/assets/later-*.js"


@pytest.fixture
def held_chunks() -> list[Any]:
    """The requests for ``LATER_CHUNK`` that ``late_page`` holds, for the test to let go."""
    return []


@pytest.fixture
def late_page(
    browser: Any, server: Any, returning_visitor: list[dict[str, Any]], held_chunks: list[Any]
) -> Iterator[Any]:
    yield from open_page(browser, server, returning_visitor, hold=LATER_CHUNK, held=held_chunks)


def test_the_bands_come_when_the_memory_pane_loads_after_the_run(
    late_page: Any, held_chunks: list[Any]
) -> None:
    """On a loaded machine the Memory pane's code (its own chunk, fetched when the page is
    idle) can arrive after the run ended and the tab was shown: the pane then draws late,
    and the editor must band its lines then too. The chunk is held back here until the
    tab is on show, so the late draw happens every time."""
    page = late_page
    page.select_option("#examples", "memory-timeline")
    assert wait_done(page) == "ok", page.inner_text("#panel-errors")
    show_tab(page, "memory")
    for _ in range(50):  # the run's events asked for the chunk: its route comes
        if held_chunks:
            break
        page.wait_for_timeout(200)
    assert held_chunks, "the page never asked for the Memory pane's chunk: nothing held"
    assert page.locator("[data-testid=memory-timeline]").count() == 0
    for route in held_chunks:
        route.continue_()
    page.wait_for_selector("[data-testid=memory-timeline]")
    page.wait_for_selector("[data-testid=code] .cm-line.cm-band", timeout=10_000)
