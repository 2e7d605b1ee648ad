"""A new user's path from the default example to the stepper of their own function with
a NaN, in Chromium, on the page before issue 35 and on the page now, side by side.

Two real ``jaxplay serve`` (the jailed warm pool by default) serve two builds of the
page: **before**, the page as it was before the navigation work (``frontend/dist`` of
``--before``, the first parent of issue 35's merge, taken from git into a temporary
folder; where that commit's ``frontend/dist`` lacks a file its ``index.html`` names, its
``frontend/src`` is built with its own lock file and the build must name the same entry
script, so it is the same page), and **after**, ``--dist`` (the committed page). Debian's
Chromium, driven by Playwright as the browser tests drive it (tests/browser/
conftest.py), plays a new user at a laptop's 1280×800 and a phone's 390×844, a fresh
browser context (empty storage) each time:

1. the page opens on the default example and its first run ends (the clock starts);
2. the user replaces the code with their own function (``CODE``: ``loss(w, x)`` with the
   shapes of its matrices in its docstring; its value is ``log`` of a negative number,
   a NaN), inserted at once: the typed code is not counted;
3. they look for the stepper where the page shows it: the Stepper tab (on the page now,
   in its group, "Values"), and do what its empty pane says (now: "Turn it on and
   re-run"; before: tick "values" under outputs, which is the "XLA outputs" box, then
   Run);
4. they read what each run shows and do what it asks: a run that fails on the entry
   (the page before kept ``f`` after the code's only function became ``loss``) has the
   entry box set by hand; one that fails on the arguments (the page before proposed a
   0-d ``jnp.array(1.0)`` per parameter: "matmul input operand 0 must have ndim at least
   1") has the args box written by hand from the docstring's shapes; a run that ended on
   another tab has the Stepper tab clicked again;
5. the clock stops when the Stepper pane is on show with its first NaN/Inf.

Each step is the shortest a user finds from what is on screen, scripted from it (the
branches read the page's own words; an unexpected screen fails the benchmark with what
it showed): no URL tricks, no hidden controls. Counted: **clicks**; **keys** (presses
besides typing: Ctrl+A, …); **typed** (characters typed besides the function: the entry,
the args); **sideways** (a click whose target was outside its tab bar's visible part,
which a user scrolls sideways to first); **runs** (run frames the page sent) and
**failed** runs. Seconds: **wall**, the scripted user acting at once, so the page's and the
server's part, and of it the time in **runs** (each from the click that started it to its
end) and the **first run**'s (a new tenant's: it waits for a sandbox when the server's pool
has no spare ready, up to 10-17 s on a loaded machine, whatever the page; the page before's
first run fails at once on its entry, so its sandbox's first compile comes in a later run);
and **paced**, wall plus a person's time per action from the
Keystroke-Level Model (1.3 s per click: pointing 1.1 s and the button; 0.28 s per key
or typed character): a model, not a measurement. Rounds interleave the sides (who goes
first alternates), medians over ``--repeat`` rounds after a warm-up round per server;
the load average with the figures, and each side's steps as played.

    .venv/bin/python benchmarks/page/new_user_path.py [--repeat 3] [--sizes laptop,phone]
        [--before 2fc5dce^1] [--before-dist DIR] [--dist DIR] [--pool zygote] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.support.live_server import LiveServer  # noqa: E402

SIZES = {"laptop": (1280, 800), "phone": (390, 844)}
FINAL = ("ok", "error", "timeout", "killed", "cancelled", "tampered")
#: the new user's function: matrix arguments whose shapes the docstring gives, a value
#: with a NaN (x @ w is 3 everywhere at ones: log(-1))
CODE = '''import jax.numpy as jnp


def loss(w, x):
    """Log-likelihood of a linear model.

    w: the weights, shape (3, 2)
    x: the inputs, shape (4, 3)
    """
    return jnp.sum(jnp.log(x @ w - 4.0))
'''
ENTRY = "loss"
#: what a user writes in the args box when the page's proposal fails: the docstring's shapes
ARGS_BY_HAND = "(jnp.ones((3, 2)), jnp.ones((4, 3)))"
#: Keystroke-Level Model operators (Card, Moran & Newell): point 1.1 s + button 0.2 s;
#: an average typist's key 0.28 s
CLICK_S = 1.3
KEY_S = 0.28

#: counts the run frames the page sends (both pages' WebSocket)
PROBE = """
(() => {
  window.__runsSent = 0;
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    if (typeof data === "string" && data.includes('"type":"run"')) window.__runsSent += 1;
    return send.call(this, data);
  };
})();
"""

#: the element's box outside the visible part of a sideways scroller around it (or of
#: the window): a user scrolls it sideways before clicking
SIDEWAYS = """(el) => {
  const r = el.getBoundingClientRect();
  let left = 0, right = innerWidth;
  for (let p = el.parentElement; p; p = p.parentElement) {
    const s = getComputedStyle(p);
    if (p.scrollWidth > p.clientWidth + 1 && /(auto|scroll|hidden)/.test(s.overflowX)) {
      const b = p.getBoundingClientRect();
      left = Math.max(left, b.left); right = Math.min(right, b.right);
    }
  }
  return r.left < left - 1 || r.right > right + 1;
}"""

#: an open <details> whose body covers the element's centre: the summary that closes it
COVERED_BY = """(el) => {
  const r = el.getBoundingClientRect();
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const top = document.elementFromPoint(x, y);
  if (top === null || el.contains(top) || top.contains(el)) return null;
  const d = top.closest("details[open]");
  if (d === null || d.contains(el)) return null;
  const summary = d.querySelector(":scope > summary");
  return summary ? summary.textContent.trim() : null;
}"""


@dataclass
class Walk:
    """One new user's path on one side at one size."""

    side: str
    size: str
    clicks: int = 0
    keys: int = 0
    typed: int = 0
    sideways: int = 0
    runs: int = 0
    failed: int = 0
    ok: int = 0
    wall_s: float = 0.0
    #: of which waiting for runs: each from the click that started it to its end
    runs_s: float = 0.0
    #: the first run alone: a new tenant's, which waits for a sandbox when the pool has no
    #: spare ready (seconds on a loaded machine), whatever the page
    first_run_s: float = 0.0
    steps: list[str] = field(default_factory=list)

    @property
    def paced_s(self) -> float:
        return self.wall_s + CLICK_S * self.clicks + KEY_S * (self.keys + self.typed)


class User:
    """Acts on the page as a person does, counting each action and saying it."""

    def __init__(self, page: Any, path: Walk) -> None:
        self.page = page
        self.path = path
        self.clicked = time.monotonic()

    def step(self, text: str) -> None:
        self.path.steps.append(text)

    def click(self, selector: str, what: str) -> None:
        target = self.page.locator(selector).first
        target.wait_for(state="attached")
        # before any scrolling: Playwright's scroll into view scrolls a tab bar sideways too
        sideways = bool(target.evaluate(SIDEWAYS))
        target.scroll_into_view_if_needed()  # the page scrolled up or down: not counted
        cover = target.evaluate(COVERED_BY)
        if cover is not None:  # an open box over it: the user closes it first
            self.page.locator("details[open] > summary", has_text=cover).first.click()
            self.path.clicks += 1
            self.step(f'click "{cover}" (closes its open box, which covered {what})')
        if sideways:
            self.path.sideways += 1
        target.click()
        self.clicked = time.monotonic()
        self.path.clicks += 1
        self.step(f"click {what}" + (" (after scrolling its bar sideways)" if sideways else ""))

    def key(self, combo: str, what: str) -> None:
        self.page.keyboard.press(combo)
        self.path.keys += 1
        self.step(f"key {combo} ({what})")

    def type(self, text: str, what: str) -> None:
        self.page.keyboard.type(text)
        self.path.typed += len(text)
        self.step(f"type {text!r} ({what}, {len(text)} characters)")


def status(page: Any) -> str:
    return str(page.get_attribute(".run-status", "data-status") or "")


def wait_ended(page: Any, runs_before: int, timeout_s: float) -> str:
    """The run sent after ``runs_before`` runs has ended; polled every 50 ms, not per frame
    (benchmarks/page/page_speed.py: a wait polled per frame keeps the renderer drawing)."""
    page.wait_for_function(
        f"""() => window.__runsSent > {runs_before} &&
          {list(FINAL)!r}.includes(document.querySelector('.run-status')?.dataset.status)""",
        polling=50,
        timeout=timeout_s * 1000,
    )
    return status(page)


def stepper_on_show(page: Any) -> bool:
    return bool(
        page.evaluate(
            """() => { const p = document.querySelector('#panel-trace_values');
              return p !== null && p.offsetParent !== null &&
                document.querySelector('#tab-trace_values')?.getAttribute('aria-selected') === 'true' }"""
        )
    )


def first_bad(page: Any) -> str | None:
    """The Stepper pane's first NaN/Inf line, when it is on show."""
    loc = page.locator("#panel-trace_values .tv-first")
    if not stepper_on_show(page) or loc.count() == 0 or not loc.first.is_visible():
        return None
    text = loc.first.inner_text().strip()
    return text if text.startswith(("First NaN", "First Inf")) else None


def open_tab(page: Any, user: User, name: str) -> None:
    """An output tab, where the page shows it: on the page now inside its group."""
    tab = page.locator(f"#tab-{name}")
    if not tab.is_visible():
        group = page.get_attribute(f"#tab-{name}", "data-group")
        button = f"[data-testid=tab-groups] button[data-group={group}]"
        user.click(button, f'the "{page.inner_text(button).strip()}" group')
    if tab.get_attribute("aria-selected") != "true":
        user.click(f"#tab-{name}", f'the "{tab.inner_text().strip()}" tab')


#: the Stepper pane has said what it has to say: its first NaN/Inf, the offer to turn it
#: on, the note where to tick it, or (no run yet, or a run without it) its waiting note
PANE_SAYS = """() => {
  const p = document.querySelector('#panel-trace_values');
  if (p === null || p.offsetParent === null) return false;
  const offer = document.querySelector('[data-testid=rerun-with-trace_values]');
  return (offer !== null && offer.offsetParent !== null) || p.querySelector('.tv-first') !== null
    || /tick|Stepper is off|Waiting for the values/.test(p.innerText);
}"""


def act_on_stepper_pane(page: Any, user: User) -> None:
    """The Stepper pane is on show without its first NaN/Inf: what it says, done."""
    page.wait_for_function(PANE_SAYS, polling=50)
    offer = page.locator("[data-testid=rerun-with-trace_values]")
    note = page.inner_text("#panel-trace_values").strip()
    if offer.count() and offer.is_visible():
        user.step(f"reads {page.inner_text('[data-testid=rerun-offer]').strip()[:90]!r}")
        user.click("[data-testid=rerun-with-trace_values]", f'"{offer.inner_text()}" in the pane')
    elif "tick" in note and "values" in note:
        user.step(f"reads {note!r}")
        # "under outputs": the one control named so is the "XLA outputs" box
        user.click("details.xla-outputs > summary", 'the "XLA outputs" box')
        user.click("#out-trace_values", 'the "values" tick')
        user.click("#run", "Run")
    elif "Waiting for the values" in note:
        user.step(f"reads {note!r} (nothing has run yet)")
        user.click("#run", "Run")
    else:
        raise RuntimeError(f"the Stepper pane says nothing a user can act on: {note!r}")


def fix_from_errors(page: Any, user: User) -> None:
    """A failed run: what its Errors pane says, fixed as a user does, and run again."""
    if page.get_attribute("#tab-errors", "aria-selected") != "true":
        open_tab(page, user, "errors")
    text = page.inner_text("#panel-errors")
    # what the pane says first: the error's kind and its message's first line
    first = " / ".join([line.strip() for line in text.splitlines() if line.strip()][:3])
    entry = page.input_value("#entry")
    if entry != ENTRY:
        user.step(f"reads the error {first[:120]!r}; the entry box says {entry!r}")
        user.click("#entry", "the entry box")
        user.key("ControlOrMeta+a", f"selects {entry!r}")
        user.type(ENTRY, "their function's name")
        page.wait_for_timeout(600)  # the args box follows the entry's signature (400 ms)
        user.step(f"the args box now says {page.input_value('#args')!r}")
    elif "ndim" in text or "args" in text:
        said = next((line.strip() for line in text.splitlines() if "ndim" in line), first)
        user.step(f"reads the error {said[:160]!r}")
        user.click("#args", "the args box")
        user.key("ControlOrMeta+a", f"selects {page.input_value('#args')!r}")
        user.type(ARGS_BY_HAND, "the docstring's shapes, by hand")
    else:
        raise RuntimeError(f"a failed run the user has no fix for: {text[:500]!r}")
    user.click("#run", "Run")


def play(page: Any, side: str, size: str, timeout_s: float) -> Walk:
    """From the default example on screen to the Stepper's first NaN/Inf."""
    path = Walk(side, size)
    user = User(page, path)
    runs_at_start = int(page.evaluate("window.__runsSent"))
    t0 = time.monotonic()
    user.click("[data-testid=code]", "into the code")
    user.key("ControlOrMeta+a", "selects the example's code")
    page.keyboard.insert_text(CODE)
    user.step("types their function (not counted)")
    for _ in range(16):
        sent = int(page.evaluate("window.__runsSent"))
        if sent > runs_at_start + path.failed + path.ok:  # a run the last action started
            ended = wait_ended(page, sent - 1, timeout_s)
            took = time.monotonic() - user.clicked
            path.runs_s += took
            if path.failed + path.ok == 0:
                path.first_run_s = took
            user.step(f"the run ends {ended!r} ({took:.1f} s after the click)")
            if ended != "ok":
                path.failed += 1
                fix_from_errors(page, user)
                continue
            path.ok += 1
        if not stepper_on_show(page):
            user.step(
                f"the page shows the {page.inner_text('[role=tab][aria-selected=true]')!r} tab"
            )
            open_tab(page, user, "trace_values")
            continue
        page.wait_for_function(PANE_SAYS, polling=50, timeout=timeout_s * 1000)
        bad = first_bad(page)
        if bad is not None:
            path.wall_s = time.monotonic() - t0
            user.step(f"the Stepper pane shows {bad!r}")
            path.runs = int(page.evaluate("window.__runsSent")) - runs_at_start
            return path
        act_on_stepper_pane(page, user)
    raise RuntimeError(f"{side} {size}: no first NaN/Inf after 16 steps: {path.steps}")


def one_path(browser: Any, url: str, side: str, size: str, timeout_s: float) -> Walk:
    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height}, base_url=url)
    context.add_init_script(PROBE)
    page = context.new_page()
    page.set_default_timeout(timeout_s * 1000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto("/")
        page.wait_for_selector("[data-testid=code]")
        # the default example on screen, nothing run yet: where a new user starts
        page.wait_for_load_state("load")
        path = play(page, side, size, timeout_s)
    finally:
        context.close()
    if errors:
        raise RuntimeError(f"{side} {size}: JavaScript errors on the page: {errors}")
    return path


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def before_dist(commit: str, tmp: Path) -> tuple[Path, str]:
    """The page of ``commit``: its committed frontend/dist, or, where that lacks a file
    its index.html names, a build of its frontend/src that names the same entry."""
    sha = git("rev-parse", "--short", commit).strip()
    tree = tmp / "tree"
    tree.mkdir()
    # the whole tree: the page's build reads examples/ and scripts/ beside frontend/
    archive = subprocess.run(
        ["git", "archive", sha], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    dist = tree / "frontend" / "dist"
    index = (dist / "index.html").read_text()
    named = re.findall(r'(?:src|href)="/(assets/[^"]+)"', index)
    missing = [n for n in named if not (dist / n).is_file()]
    if not missing:
        return dist, f"{sha}'s committed frontend/dist"
    built = tmp / "built"
    frontend = tree / "frontend"
    subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=frontend, check=True
    )
    subprocess.run(
        ["npx", "vite", "build", "--logLevel", "warn", "--outDir", str(built), "--emptyOutDir"],
        cwd=frontend,
        check=True,
    )
    subprocess.run(
        ["node", str(tree / "scripts" / "precompress_assets.mjs"), str(built)],
        check=True,
        capture_output=True,
    )
    rebuilt = re.findall(r'(?:src|href)="/(assets/[^"]+)"', (built / "index.html").read_text())
    if rebuilt != named:
        raise RuntimeError(f"{sha}'s frontend/src builds {rebuilt}, its dist names {named}")
    shutil.rmtree(frontend / "node_modules")
    return built, (
        f"{sha}'s frontend/src built (its committed dist lacks {', '.join(missing)}; "
        f"the build names the same {', '.join(named)})"
    )


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (each side, each size)")
    parser.add_argument(
        "--sizes", default="laptop,phone", help="laptop (1280×800), phone (390×844)"
    )
    parser.add_argument("--before", default="2fc5dce^1", help="the commit of the page before")
    parser.add_argument("--before-dist", type=Path, default=None, help="its build, if made")
    parser.add_argument("--dist", type=Path, default=ROOT / "frontend" / "dist")
    parser.add_argument("--pool", default="zygote", help="the servers' pool")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait per run")
    parser.add_argument("--json", type=Path, default=None, help="every path written here")
    args = parser.parse_args()
    sizes = [s for s in args.sizes.split(",") if s]
    if set(sizes) - set(SIZES):
        parser.error(f"--sizes: {', '.join(SIZES)}")

    from playwright.sync_api import sync_playwright

    paths: list[Walk] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if args.before_dist is not None:
            old, how = args.before_dist, f"{args.before_dist} (given)"
        else:
            old, how = before_dist(args.before, tmp)
        print(f"before: {how}\nafter: {args.dist}")
        servers: dict[str, LiveServer] = {}
        try:
            for side, dist in (("before", old), ("after", args.dist)):
                (tmp / side).mkdir()
                servers[side] = LiveServer(
                    tmp / side / "jaxplay.sqlite3",
                    "--pool",
                    args.pool,
                    env={
                        "JAXPLAY_FRONTEND_DIST": str(dist),
                        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
                        "JAXPLAY_QUEUE_TIMEOUT_S": "120",
                    },
                    log=tmp / side / "serve.log",
                    as_user=True,
                ).launch()
            for server in servers.values():
                server.wait_ready(120)
            load_start = load_average()
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for side, server in servers.items():  # warm-up: each server's first tenant
                    warm = one_path(browser, server.url, side, sizes[0], args.timeout)
                    print(f"warm-up {side} {sizes[0]}: {warm.wall_s:.1f} s")
                for r in range(args.repeat):
                    for i, size in enumerate(sizes):
                        order = ["before", "after"] if (r + i) % 2 == 0 else ["after", "before"]
                        for side in order:
                            path = one_path(browser, servers[side].url, side, size, args.timeout)
                            paths.append(path)
                            print(
                                f"round {r + 1} {size} {side}: {path.clicks} clicks, "
                                f"{path.keys} keys, {path.typed} typed, {path.runs} runs "
                                f"({path.failed} failed), {path.wall_s:.1f} s ({path.runs_s:.1f} in runs)  "
                                f"[load {load_average()}]",
                                flush=True,
                            )
                browser.close()
        finally:
            for server in servers.values():
                server.stop()
    load_end = load_average()

    print(f"\nload average (1, 5, 15 min): {load_start} at the start, {load_end} at the end")
    print(
        f"medians of {args.repeat} rounds; paced = wall + {CLICK_S} s a click + "
        f"{KEY_S} s a key or typed character (Keystroke-Level Model)\n"
    )
    print(
        "| size | page | clicks | keys | typed | sideways | runs (failed) | wall s "
        "| of which runs s | first run s | paced s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size in sizes:
        for side in ("before", "after"):
            mine = [p for p in paths if p.size == size and p.side == side]
            if not mine:
                continue

            def m(key: str, mine: list[Walk] = mine) -> float:
                return median([float(getattr(p, key)) for p in mine])

            print(
                f"| {size} {SIZES[size][0]}×{SIZES[size][1]} | {side} | {m('clicks'):g} | "
                f"{m('keys'):g} | {m('typed'):g} | {m('sideways'):g} | {m('runs'):g} "
                f"({m('failed'):g}) | {m('wall_s'):.1f} | {m('runs_s'):.1f} | "
                f"{m('first_run_s'):.1f} | {m('paced_s'):.1f} |"
            )
    for size in sizes:
        for side in ("before", "after"):
            mine = [p for p in paths if p.size == size and p.side == side]
            if mine:
                print(f"\n{side}, {size}, as played (round 1):")
                for n, text in enumerate(mine[0].steps, 1):
                    print(f"  {n}. {text}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "load_start": load_start,
                    "load_end": load_end,
                    "paths": [{**asdict(p), "paced_s": p.paced_s} for p in paths],
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
