"""From Ctrl+Enter to the outputs on screen, in Chromium, side by side with the API.

A real ``jaxplay serve`` (the jailed warm pool by default) serves frontend/dist;
Debian's Chromium, driven by Playwright as the browser tests drive it
(tests/browser/conftest.py), opens the page. For each example of the menu: the
example is loaded (its first run warms the tenant), then ``--repeat`` warm edits of each
kind of ``--edits``, as a person edits, then a pause and Ctrl+Enter in the editor:

- **comment**: a new comment line typed at the end of the code: the jaxpr stays the
  same, so the page has nothing to redraw (what the figures before issue 32 measured);
- **ir**: a float literal of a function's body that the jaxpr shows (``0.9`` in
  ``mul 0.9:f32[] b``) typed anew, a new value each edit (``0.9001``, ``0.9002``, …):
  the jaxpr changes, so the pane redraws what a user sees change. An example with no
  such literal has no ir row (said); an edit whose jaxpr did not change is counted.

Measured in the page (performance.now(), from the key event's timestamp):

- **sent**: the key press to the ``run`` frame leaving the WebSocket;
- **jaxpr**: the key press to the frame after the jaxpr pane shows the new jaxpr;
- **arrived**: the key press to the ``jaxpr`` event's arrival on the socket, so that
  **page** = jaxpr - arrived + sent is what the page adds to the protocol, and
  arrived - sent (**sent→jaxpr event**) is the server's part, to compare with the
  API client's;
- **net**: the ``run`` frame sent to the ``jaxpr`` frame received, as the DevTools
  protocol stamps them. Chromium stamps WebSocket frames in the renderer, on the page's
  main thread, when it hands a frame to the page: not the network's time, the page's
  busy main thread is in it (frames that came while it was busy carry one stamp, bunched,
  where the API client sees them spread out: that, not a slower server, made the page's
  "server part" twice the API's in the first measurements);
- **all**: the key press to the frame after the run's status says it ended (every
  output the run sent has arrived; panes not on show render when shown or idle).

Beside it, in the same run, the API's own time: a WebSocket client in Python (its own
tenant, token ``page-speed-api``) sends the page's own request, the payload of its last
``run`` frame (another comment at the end of the code: not a cache hit), and times its
``jaxpr`` and ``done`` events from the send; any field where the two frames differ
besides the seq and the code is printed. Who goes first alternates from edit to edit. The page is waited on by polling every 50 ms, not every
animation frame (Playwright's default): a wait polled per frame keeps the renderer
drawing frames for the whole run, on the cores the server's run needs (measured on
2 loaded cores: 69 main-thread frames in a run against 24). The load average is printed with the figures:
on a shared machine they mean little without it. Medians and p95 per
example and overall; the targets of issue 26 (a warm edit's jaxpr on screen <= 50 ms
median, <= 100 ms p95; the page adds <= 15 ms over the API) are printed beside them.

``--trace FILE`` records a Chromium trace of the first example's warm edits (the
probe marks ``speed:key``, ``:sent``, ``:arrived``, ``:jaxpr`` in it) and prints where
the renderer's time went in them: per part of key → sent → arrived → jaxpr on screen,
the main thread's busy time and CPU, the CPU time of every browser thread, the main
thread's self time per event and the layouts the page's script forced. Tracing slows
the page: its figures are for comparing traces, not for the table.

``--replace`` also measures, on the API, what a second run asked for while the first
is going costs (issue 26 item 4): sent at once (the server cancels the first, which
retires the tenant's kept process) against waiting for the first's ``done`` and then
sending; the time from asking to the second run's jaxpr.

    .venv/bin/python benchmarks/page/page_speed.py [--repeat 15] [--examples grad-loss,...]
        [--pause 0.6] [--replace 10] [--pool zygote|fake] [--dist DIR] [--trace FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.support.stats import percentile  # noqa: E402
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.support.live_server import LiveServer  # noqa: E402

TOKEN = "page-speed-api"
FINAL = ("ok", "error", "timeout", "killed", "cancelled", "tampered")

#: in the page before its own scripts: the key press, the run frame, the jaxpr event's
#: arrival, the jaxpr pane showing the new jaxpr, the status saying the run ended. The
#: page keeps the last run's jaxpr on show while a run goes (marked stale only when
#: the new one is late; a page before that marked it at once, one before that emptied
#: the pane), and the benchmark's edits leave the jaxpr's text as it was: the new jaxpr
#: is on show when, after the run was sent, the pane shows a jaxpr not marked stale
#: and the page holds this run's jaxpr for it (``jaxplay.text``: this run's text, never
#: the last run's), looked at on every change to the page and once the page has
#: handled the jaxpr's message (its text drawn again may change nothing); checked
#: then: the run's jaxpr event had arrived and the pane's text is that event's text
#: (``checked``; an edit that fails it, or whose jaxpr was never seen, is left out of
#: the figures and said).
PROBE = """
(() => {
  const m = (window.__speed = { t0: null, sent: null, arrived: null, jaxpr: null, all: null });
  document.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter") {
      Object.assign(m, { t0: e.timeStamp, sent: null, arrived: null, jaxpr: null, all: null, checked: null, jaxprData: null });
      performance.mark("speed:key");
    }
  }, true);
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    if (m.t0 !== null && m.sent === null && typeof data === "string" && data.includes('"type":"run"')) {
      m.sent = performance.now();
      performance.mark("speed:sent");
    }
    return send.call(this, data);
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...a) {
      super(...a);
      this.addEventListener("message", (e) => {
        if (m.t0 !== null && m.sent !== null && m.arrived === null && typeof e.data === "string"
            && e.data.includes('"type":"jaxpr"')) {
          m.arrived = performance.now();
          m.jaxprData = e.data; // parsed when checked, not before the page's own handler
          performance.mark("speed:arrived");
          setTimeout(look, 0); // after the page's own handler (registered after this one)
        }
      });
    }
  };
  const shows = () => {
    const pane = document.querySelector("[data-testid=out-jaxpr]");
    return pane !== null && !pane.closest("[hidden]") && !pane.closest("[aria-busy=true]")
      && /lambda/.test(pane.textContent || "");
  };
  const ended = () => {
    const s = document.querySelector(".run-status");
    return s !== null && __FINAL__.includes(s.dataset.status);
  };
  // this run's jaxpr (null while the pane shows the last run's, stale or not)
  const runText = () => (window.jaxplay ? window.jaxplay.text("jaxpr") : null);
  function look() {
    if (m.t0 === null || m.sent === null) return;
    if (m.jaxpr === null && m.jaxprAsked !== m.t0 && shows()) {
      const text = runText();
      if (text !== null && text !== undefined) {
        m.jaxprAsked = m.t0;
        m.checked = m.jaxprData !== null && text === JSON.parse(m.jaxprData).payload.text;
        requestAnimationFrame(() => {
          m.jaxpr = performance.now();
          performance.mark("speed:jaxpr");
        });
      }
    }
    if (m.all === null && m.allAsked !== m.t0 && ended()) {
      m.allAsked = m.t0;
      requestAnimationFrame(() => (m.all = performance.now()));
    }
  }
  new MutationObserver(look).observe(document, { subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ["data-status", "hidden", "aria-busy"] });
})();
""".replace("__FINAL__", json.dumps(list(FINAL)))


#: what a ``--trace`` records: the timeline DevTools' Performance panel shows, the
#: probe's marks (``speed:key``, ``:sent``, ``:arrived``, ``:jaxpr``) and the stacks of
#: forced layouts
TRACE_CATEGORIES = [
    "devtools.timeline",
    "disabled-by-default-devtools.timeline",
    "disabled-by-default-devtools.timeline.frame",
    "disabled-by-default-devtools.timeline.stack",
    "blink.user_timing",
    "toplevel",
]
#: main-thread events that run the page's script: a layout inside one was forced by it
SCRIPT = {
    "FunctionCall",
    "EventDispatch",
    "TimerFire",
    "FireAnimationFrame",
    "FireIdleCallback",
    "RunMicrotasks",
    "V8.Execute",
    "EvaluateScript",
}


def _spans(events: list[dict[str, Any]]) -> list[tuple[float, float, str, dict[str, Any]]]:
    """A thread's events with a duration, as (start, end, name, args), outermost first
    when two start together (µs, the trace's clock)."""
    out: list[tuple[float, float, str, dict[str, Any]]] = []
    open_: dict[str, list[dict[str, Any]]] = {}
    for e in sorted(events, key=lambda e: e["ts"]):
        ph = e.get("ph")
        if ph == "X" and "dur" in e:
            args = {**(e.get("args") or {}), "__cpu": e.get("tdur", e["dur"])}
            out.append((e["ts"], e["ts"] + e["dur"], e["name"], args))
        elif ph == "B":
            open_.setdefault(e["name"], []).append(e)
        elif ph == "E" and open_.get(e["name"]):
            b = open_[e["name"]].pop()
            out.append(
                (b["ts"], e["ts"], e["name"], {**(b.get("args") or {}), **(e.get("args") or {})})
            )
    out.sort(key=lambda s: (s[0], -s[1]))
    return out


def _clip(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


def trace_breakdown(data: bytes) -> list[str]:
    """Where the renderer's time went while each warm edit's jaxpr was on its way (a
    trace taken with the probe's marks): per edit, median ms in each part of key → sent
    → arrived → jaxpr on screen, the main thread's busy time, its self time per event
    (the top ones, from key to jaxpr on screen), the layouts the page's script forced,
    and the compositor's and raster threads' busy time."""
    raw = json.loads(data)
    events: list[dict[str, Any]] = raw["traceEvents"] if isinstance(raw, dict) else raw
    thread_names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    marks = sorted(
        (e["ts"], e["name"], e["pid"])
        for e in events
        if str(e.get("name", "")).startswith("speed:") and e.get("ph") in ("R", "I", "i", "n", "b")
    )
    if not marks:
        return ["trace: no probe marks in it"]
    pid = marks[0][2]
    # the edits: key, then the first sent, arrived, jaxpr after it
    edits: list[dict[str, float]] = []
    for ts, name, _ in marks:
        part = name.split(":", 1)[1]
        if part == "key":
            edits.append({"key": ts})
        elif edits and part not in edits[-1]:
            edits[-1][part] = ts
    edits = [e for e in edits if {"sent", "arrived", "jaxpr"} <= set(e)]
    if not edits:
        return ["trace: no edit with all its marks"]
    process_names = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    by_thread: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in events:
        if e.get("ph") in ("X", "B", "E") and (e["pid"], e["tid"]) in thread_names:
            name = thread_names[(e["pid"], e["tid"])]
            if e["pid"] == pid and name == "CrRendererMain":
                name = "main"
            process = "page" if e["pid"] == pid else process_names.get(e["pid"], str(e["pid"]))
            by_thread.setdefault((process, name), []).append(e)
    spans = {t: _spans(ev) for t, ev in by_thread.items()}
    main = spans.get(("page", "main"), [])
    segments = (
        ("key→sent", "key", "sent"),
        ("sent→arrived", "sent", "arrived"),
        ("arrived→jaxpr", "arrived", "jaxpr"),
    )

    def busy(thread: list[tuple[float, float, str, dict[str, Any]]], lo: float, hi: float) -> float:
        total, reach = 0.0, lo
        for a, b, _, _ in thread:  # the union of the spans (nested ones inside their parent)
            if b <= reach or a >= hi:
                continue
            total += _clip(max(a, reach), b, lo, hi)
            reach = max(reach, b)
        return total / 1000

    def cpu_ms(
        thread: list[tuple[float, float, str, dict[str, Any]]], lo: float, hi: float
    ) -> float:
        total, reach = 0.0, lo
        for a, b, _, args in thread:  # the outermost spans' thread time, the part in the window
            if b <= reach or a >= hi:
                continue
            if b > a:
                total += args["__cpu"] * _clip(max(a, reach), b, lo, hi) / (b - a)
            reach = max(reach, b)
        return total / 1000

    self_ms: dict[str, float] = {}
    forced: dict[str, int] = {}
    layouts = 0
    for edit in edits:
        lo, hi = edit["key"], edit["jaxpr"]
        stack: list[int] = []  # indices in `inside` of the spans open at this one
        children: dict[int, float] = {}
        inside = [s for s in main if s[1] > lo and s[0] < hi]
        for i, s in enumerate(inside):
            while stack and inside[stack[-1]][1] <= s[0]:
                stack.pop()
            if stack:
                children[stack[-1]] = children.get(stack[-1], 0.0) + _clip(s[0], s[1], lo, hi)
            if s[2] in ("Layout", "UpdateLayoutTree"):
                layouts += 1
                script = next(
                    (inside[p][2] for p in reversed(stack) if inside[p][2] in SCRIPT), None
                )
                if script is not None:
                    begin = s[3].get("beginData") or s[3].get("data") or {}
                    frames = begin.get("stackTrace") or []
                    where = next(
                        (f.get("functionName") for f in frames if f.get("functionName")), script
                    )
                    key = f"{s[2]} in {where}"
                    forced[key] = forced.get(key, 0) + 1
            stack.append(i)
        for i, s in enumerate(inside):
            if s[2] in ("ThreadControllerImpl::RunTask", "RunTask"):
                continue  # the task itself: its children say what it did
            own = _clip(s[0], s[1], lo, hi) - children.get(i, 0.0)
            self_ms[s[2]] = self_ms.get(s[2], 0.0) + own / 1000
    n = len(edits)
    lines = [f"trace: {n} edits (ms per edit, median; the renderer's threads)"]
    for label, a, b in segments:
        span = statistics.median((e[b] - e[a]) / 1000 for e in edits)
        main_busy = statistics.median(busy(main, e[a], e[b]) for e in edits)
        main_cpu = statistics.median(cpu_ms(main, e[a], e[b]) for e in edits)
        lines.append(
            f"  {label}: {span:.1f} ms, the page's main thread busy {main_busy:.1f} (CPU {main_cpu:.1f})"
        )
    for label, a, b in (("key→arrived", "key", "arrived"), ("arrived→jaxpr", "arrived", "jaxpr")):
        cpu = {
            t: statistics.median(cpu_ms(sp, e[a], e[b]) for e in edits) for t, sp in spans.items()
        }
        top_cpu = sorted(cpu.items(), key=lambda kv: -kv[1])[:6]
        lines.append(
            f"  CPU time {label}, all the browser's threads: {sum(cpu.values()):.1f} ("
            + ", ".join(f"{p} {t} {v:.1f}" for (p, t), v in top_cpu)
            + ")"
        )
    top = sorted(self_ms.items(), key=lambda kv: -kv[1])[:14]
    lines.append(
        "  main thread self time key→jaxpr, per edit: "
        + ", ".join(f"{k} {v / n:.1f}" for k, v in top)
    )
    lines.append(
        f"  style/layout passes key→jaxpr per edit: {layouts / n:.1f}; forced by script, per edit:"
    )
    for where, count in sorted(forced.items(), key=lambda kv: -kv[1])[:10]:
        lines.append(f"    {where}: {count / n:.1f}")
    return lines


def frame_diff(page: dict[str, Any], api: dict[str, Any]) -> list[str]:
    """Where the API client's ``run`` frame differs from the page's, as both went on the
    wire, besides the seq and the code (the API's has one more comment at its end)."""
    out = [
        f"{k}: page {page.get(k)!r}, API {api.get(k)!r}"
        for k in sorted(set(page) | set(api))
        if k not in ("seq", "payload") and page.get(k) != api.get(k)
    ]
    p, a = page.get("payload") or {}, api.get("payload") or {}
    out += [
        f"payload.{k}: page {p.get(k)!r}, API {a.get(k)!r}"
        for k in sorted(set(p) | set(a))
        if k != "code" and p.get(k) != a.get(k)
    ]
    if not str(a.get("code", "")).startswith(str(p.get("code", ""))):
        out.append("payload.code: not the page's code and a comment")
    return out


#: a float literal of the code, as a whole token
LITERAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")
#: literals an edit of which may leave the jaxpr as it was (defaults, other uses)
COMMON = {"0.0", "1.0", "2.0", "0.5"}


def ir_literal(page: Any) -> str:
    """A float literal of the code that the jaxpr on show has (``0.9`` in ``mul
    0.9:f32[] b``), the less common first; "" when there is none."""
    code = page.evaluate("() => window.jaxplay.code()")
    jaxpr = page.evaluate("() => window.jaxplay.text('jaxpr')") or ""
    # in a function's body (an indented line, not a comment): a literal of the data
    # (grad-loss's X) is in the jaxpr only by chance, and editing it changes nothing
    body = [line.split("#")[0] for line in code.splitlines() if line[:1] in (" ", "\t")]
    found = [lit for line in body for lit in LITERAL.findall(line) if f"{lit}:" in jaxpr]
    found.sort(key=lambda lit: lit in COMMON)
    return found[0] if found else ""


#: selects the first occurrence of a literal in the editor, as a person's double click
#: would: CodeMirror takes the page's selection as its own
SELECT_LITERAL = """(lit) => {
  const root = document.querySelector("[data-testid=code]");
  root.focus();
  const re = new RegExp("(^|[^\\w.])" + lit.replace(".", "\\.") + "(?![\\w.])");
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const m = re.exec(n.textContent);
    if (!m) continue;
    const at = m.index + m[1].length;
    getSelection().setBaseAndExtent(n, at, n, at + lit.length);
    return true;
  }
  return false;
}"""


def type_literal(page: Any, literal: str, base: str, i: int) -> str:
    """Types over ``literal`` (now in the editor) edit ``i``'s value of ``base`` (the
    literal as the example has it): a new one each edit, so the jaxpr changes and no
    run is a cache hit; returns it."""
    if not page.evaluate(SELECT_LITERAL, literal):
        raise RuntimeError(f"the literal {literal} is not drawn in the editor")
    page.wait_for_timeout(50)  # CodeMirror reads the selection on selectionchange
    decimals = max(4, len(base.split(".")[1]) + 1)
    new = f"{float(base) + (i + 1) * 10**-decimals:.{decimals}f}"
    page.keyboard.insert_text(new)
    return new


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def fmt(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} / {percentile(values, 0.95):.1f}"


class NetTimes:
    """The browser's own stamps of WebSocket frames (DevTools protocol, seconds): when a
    ``run`` frame left and its first ``jaxpr`` frame came, before the page's main thread
    handles either."""

    def __init__(self, cdp: Any) -> None:
        self.sent: dict[int, float] = {}
        self.jaxpr: dict[int, float] = {}
        cdp.on("Network.webSocketFrameSent", self._sent)
        cdp.on("Network.webSocketFrameReceived", self._received)
        cdp.send("Network.enable")

    def _sent(self, params: dict[str, Any]) -> None:
        data = params["response"]["payloadData"]
        if '"type":"run"' in data:
            self.sent[json.loads(data)["seq"]] = params["timestamp"]

    def _received(self, params: dict[str, Any]) -> None:
        data = params["response"]["payloadData"]
        if '"type":"jaxpr"' in data:
            self.jaxpr.setdefault(json.loads(data)["seq"], params["timestamp"])

    def wire_ms(self, seq: int) -> float | None:
        if seq not in self.sent or seq not in self.jaxpr:
            return None
        return (self.jaxpr[seq] - self.sent[seq]) * 1000


class Api:
    """A WebSocket client of its own (its own tenant): times a run's events from the send."""

    def __init__(self, url: str) -> None:
        self.url = f"{url.replace('http', 'ws', 1)}/api/v1/ws?token={TOKEN}"
        self._stack = contextlib.ExitStack()
        self.seq = 0
        self.last_frame = ""
        self._connect()

    def _connect(self) -> None:
        from websockets.sync.client import connect

        self._stack.close()
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(self.url, max_size=2**24, open_timeout=30))
        self.ws.recv(timeout=30)  # hello

    def send(self, request: dict[str, Any]) -> int:
        from websockets.exceptions import ConnectionClosed

        self.seq += 1
        message = json.dumps({"type": "run", "seq": self.seq, "payload": request})
        self.last_frame = message
        try:
            self.ws.send(message)
        except ConnectionClosed:  # the server closes a socket idle for 30 s
            self._connect()
            self.ws.send(message)
        return self.seq

    def until(self, seq: int, kind: str, timeout_s: float = 120) -> tuple[float, dict[str, Any]]:
        """Reads until run `seq`'s event of `kind` (or its done): when it came, and it."""
        deadline = time.monotonic() + timeout_s
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("seq") != seq:
                continue
            if msg["type"] == "error":
                raise RuntimeError(f"run refused: {msg}")
            event = msg["payload"]
            if event["type"] in (kind, "done"):
                return time.perf_counter(), event

    def run(self, request: dict[str, Any]) -> tuple[float, float, str]:
        """One run: ms to its jaxpr, ms to its done, its status."""
        t0 = time.perf_counter()
        seq = self.send(request)
        t_jaxpr, event = self.until(seq, "jaxpr")
        t_done = t_jaxpr
        while event["type"] != "done":
            t_done, event = self.until(seq, "done")
        return (t_jaxpr - t0) * 1000, (t_done - t0) * 1000, event["status"]

    def close(self) -> None:
        self._stack.close()


def api_turn(api: Api, last: dict[str, Any], row: dict[str, list[float]], example: str) -> None:
    """The API client runs the page's last request (its ``run`` frame, the code with one
    more comment) and its times go in `row`; a frame not like the page's is said."""
    request = last["payload"]
    ms_jaxpr, ms_done, _ = api.run({**request, "code": request["code"] + "\n# api\n"})
    differ = frame_diff(last, json.loads(api.last_frame))
    if differ:
        print(f"{example}: the API's frame differs from the page's: {differ}", file=sys.stderr)
    row["jaxpr"].append(ms_jaxpr)
    row["all"].append(ms_done)


def replace_cost(
    api: Api, request: dict[str, Any], rounds: int, stamp: str
) -> dict[str, list[float]]:
    """A second run asked for 5 ms after the first: sent at once (cancels the first) or
    after the first's done; ms from asking to the second's jaxpr."""
    out: dict[str, list[float]] = {
        "a warm run alone": [],
        "send at once (cancel)": [],
        "wait for done": [],
    }
    for i in range(rounds):
        out["a warm run alone"].append(
            api.run({**request, "code": request["code"] + f"\n# {stamp} r{i} alone\n"})[0]
        )
        for way in ("send at once (cancel)", "wait for done"):
            first = api.send(
                {**request, "code": request["code"] + f"\n# {stamp} r{i} {way[:4]} a\n"}
            )
            time.sleep(0.005)
            asked = time.perf_counter()
            if way == "wait for done":
                api.until(first, "done")
            second = api.send(
                {**request, "code": request["code"] + f"\n# {stamp} r{i} {way[:4]} b\n"}
            )
            t, event = api.until(second, "jaxpr")
            if event["type"] == "jaxpr":
                out[way].append((t - asked) * 1000)
            api.until(second, "done")
            # a run after it, as the edit loop goes on: the cancelled way pays here too
            api.run({**request, "code": request["code"] + f"\n# {stamp} r{i} {way[:4]} c\n"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="warm edits per example")
    parser.add_argument(
        "--examples", default="", help="example ids, comma-separated (default: all)"
    )
    parser.add_argument(
        "--pause", type=float, default=0.6, help="seconds between an edit and its run"
    )
    parser.add_argument(
        "--replace", type=int, default=0, help="rounds of the replace-cost measurement"
    )
    parser.add_argument(
        "--edits",
        default="comment,ir",
        help="kinds of edit, comma-separated: comment (the jaxpr stays), ir (the jaxpr changes)",
    )
    parser.add_argument("--pool", default="zygote", help="the server's pool (fake: no JAX)")
    parser.add_argument("--dist", type=Path, default=ROOT / "frontend" / "dist")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait per run")
    parser.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="a Chromium trace of the warm edits written here, and where the renderer's time went",
    )
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    page_rows: dict[str, dict[str, list[float]]] = {}
    breakdown: list[str] = []
    unchecked: list[str] = []  # edits whose jaxpr on show was not the run's
    kinds = [k for k in args.edits.split(",") if k]
    if set(kinds) - {"comment", "ir"}:
        parser.error(f"--edits: comment and/or ir, not {args.edits}")
    skipped: list[str] = []  # examples with no literal the jaxpr shows: no ir edits
    same_ir: list[str] = []  # ir edits whose jaxpr stayed the same
    api_rows: dict[str, dict[str, list[float]]] = {}
    replace: dict[str, list[float]] = {}
    stamp = str(int(time.time()))
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(
            Path(tmp) / "jaxplay.sqlite3",
            "--pool",
            args.pool,
            "--frontend-dist",
            str(args.dist),
            env={"JAXPLAY_API_TOKENS": json.dumps([TOKEN]), "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0"},
        ).start(timeout_s=120)
        try:
            api = Api(server.url)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                context = browser.new_context(viewport={"width": 1440, "height": 900})
                context.add_init_script(PROBE)
                page = context.new_page()
                page.set_default_timeout(args.timeout * 1000)
                frames: list[dict[str, Any]] = []
                page.on(
                    "websocket",
                    lambda ws: ws.on("framesent", lambda f: frames.append(json.loads(f))),
                )
                net = NetTimes(context.new_cdp_session(page))
                page.goto(server.url + "/")
                page.wait_for_selector("[data-testid=code]")
                ids = [
                    o
                    for o in page.eval_on_selector_all(
                        "#examples option", "os => os.map(o => o.value)"
                    )
                    if o
                ]
                if args.examples:
                    ids = [i for i in args.examples.split(",") if i in ids]
                final = ",".join(f".run-status[data-status={s}]" for s in FINAL)
                traced = False
                for example in ids:
                    page.select_option("#examples", example)  # loads it and runs it (the warm-up)
                    page.wait_for_selector(final)
                    page.wait_for_timeout(300)
                    for kind in kinds:
                        literal = base = ir_literal(page) if kind == "ir" else ""
                        if kind == "ir" and not literal:
                            skipped.append(example)
                            continue
                        row_name = f"{example} ({kind})"
                        rows = page_rows.setdefault(
                            row_name,
                            {"sent": [], "wire": [], "net": [], "jaxpr": [], "all": [], "page": []},
                        )
                        api_row = api_rows.setdefault(row_name, {"jaxpr": [], "all": []})
                        before = page.evaluate("() => window.jaxplay.text('jaxpr')")
                        # the API's tenant warms on the same request first
                        request = next(m for m in reversed(frames) if m.get("type") == "run")[
                            "payload"
                        ]
                        api.run({**request, "code": request["code"] + f"\n# {stamp} api warm\n"})
                        statuses: list[str] = []
                        if args.trace is not None and not traced:
                            browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
                            traced = True

                        for i in range(args.repeat):
                            # who goes first alternates: neither run always follows the other's
                            if i % 2 == 1:
                                api_turn(
                                    api,
                                    next(f for f in reversed(frames) if f.get("type") == "run"),
                                    api_row,
                                    example,
                                )
                            if kind == "ir":
                                literal = type_literal(page, literal, base, i)
                            else:
                                page.click("[data-testid=code]")
                                page.keyboard.press("Control+End")
                                page.keyboard.insert_text(f"\n# {stamp} edit {i}")
                            page.wait_for_timeout(args.pause * 1000)
                            page.keyboard.press("Control+Enter")
                            page.wait_for_function(
                                "() => window.__speed.all !== null && window.__speed.sent !== null",
                                polling=50,
                            )
                            m = page.evaluate("() => window.__speed")
                            after = page.evaluate("() => window.jaxplay.text('jaxpr')")
                            if kind == "ir" and after == before:
                                same_ir.append(f"{example} edit {i}")
                            before = after
                            statuses.append(page.get_attribute(".run-status", "data-status") or "?")
                            rows["sent"].append(m["sent"] - m["t0"])
                            rows["all"].append(m["all"] - m["t0"])
                            if m["jaxpr"] is None:
                                unchecked.append(f"{example} edit {i} (no jaxpr seen)")
                            elif not m["checked"]:
                                unchecked.append(f"{example} edit {i}")
                            elif m["jaxpr"] is not None and m["arrived"] is not None:
                                rows["jaxpr"].append(m["jaxpr"] - m["t0"])
                                rows["wire"].append(m["arrived"] - m["sent"])
                                rows["page"].append(m["jaxpr"] - m["arrived"] + m["sent"] - m["t0"])
                            last = next(f for f in reversed(frames) if f.get("type") == "run")
                            wire = net.wire_ms(last["seq"])
                            if wire is not None:
                                rows["net"].append(wire)
                            if i % 2 == 0:
                                api_turn(api, last, api_row, row_name)
                            time.sleep(args.pause)
                        print(
                            f"{example} ({kind}): {args.repeat} edits, statuses {sorted(set(statuses))}",
                            file=sys.stderr,
                        )
                if traced:
                    trace = browser.stop_tracing()
                    args.trace.write_bytes(trace)
                    breakdown = trace_breakdown(trace)
                if args.replace:
                    first = next(f for f in frames if f.get("type") == "run")["payload"]
                    replace = replace_cost(api, first, args.replace, stamp)
                browser.close()
            api.close()
        finally:
            server.stop()

    print(
        f"page speed: {args.repeat} warm edits per example, pool {args.pool}; ms, median / p95; "
        f"load average {load_before} before, {load_average()} after (1, 5, 15 min)"
    )
    head = (
        "example",
        "key→sent",
        "sent→jaxpr event",
        "net (main thread)",
        "key→jaxpr",
        "API jaxpr",
        "page adds",
        "key→all",
        "API done",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    every: dict[str, list[float]] = {
        k: [] for k in ("sent", "wire", "net", "jaxpr", "api", "page", "all", "api_all")
    }
    for example, r in page_rows.items():
        a = api_rows[example]
        print(
            f"| {example} | {fmt(r['sent'])} | {fmt(r['wire'])} | {fmt(r['net'])} | {fmt(r['jaxpr'])} | {fmt(a['jaxpr'])} | {fmt(r['page'])} | {fmt(r['all'])} | {fmt(a['all'])} |"
        )
        for k, v in (
            ("sent", r["sent"]),
            ("wire", r["wire"]),
            ("net", r["net"]),
            ("jaxpr", r["jaxpr"]),
            ("api", a["jaxpr"]),
            ("page", r["page"]),
            ("all", r["all"]),
            ("api_all", a["all"]),
        ):
            every[k] += v
    print(
        f"| **all** | {fmt(every['sent'])} | {fmt(every['wire'])} | {fmt(every['net'])} | {fmt(every['jaxpr'])} | {fmt(every['api'])} | {fmt(every['page'])} | {fmt(every['all'])} | {fmt(every['api_all'])} |"
    )
    if every["jaxpr"] and every["api"]:
        print(
            f"targets (issue 26): key→jaxpr median {statistics.median(every['jaxpr']):.1f} ms (≤ 50), "
            f"p95 {percentile(every['jaxpr'], 0.95):.1f} ms (≤ 100); the page adds "
            f"{statistics.median(every['page']):.1f} ms median (≤ 15); "
            f"key→jaxpr minus the API's jaxpr: {statistics.median(every['jaxpr']) - statistics.median(every['api']):.1f} ms; "
            f"the page's server part (sent→jaxpr event) over the API's jaxpr: "
            f"{statistics.median(every['wire']) / statistics.median(every['api']):.2f}×"
        )
    for kind in kinds:
        mine = [
            v for name, r in page_rows.items() if name.endswith(f"({kind})") for v in r["jaxpr"]
        ]
        if mine:
            print(
                f"{kind} edits: key→jaxpr median {statistics.median(mine):.1f} ms, "
                f"p95 {percentile(mine, 0.95):.1f} ms ({len(mine)} edits; targets of issue 32 for ir: ≤ 50, ≤ 100)"
            )
    if skipped:
        print(f"no ir edits (no float literal of the code in its jaxpr): {', '.join(skipped)}")
    if same_ir:
        print(f"ir edits whose jaxpr did not change: {len(same_ir)}: {', '.join(same_ir)}")
    if unchecked:
        print(
            f"left out: {len(unchecked)} edits where the pane showed a jaxpr as new that was "
            f"not the run's (not arrived yet, or another text), or none: {', '.join(unchecked)}"
        )
    for line in breakdown:
        print(line)
    if replace:
        print(
            "a second run asked for while the first is going (API, ms from asking to its jaxpr, median / p95):"
        )
        for way, values in replace.items():
            print(f"  {way}: {fmt(values)}")


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
