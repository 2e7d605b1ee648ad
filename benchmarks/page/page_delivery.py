"""How a shared link is delivered: bytes on the wire and time to the jaxpr, in Chromium.

A real ``jaxplay serve`` (the jailed pool by default) serves frontend/dist; Debian's
Chromium, driven by Playwright as the browser tests drive it (tests/browser/
conftest.py), opens shared links (``/s/{id}``) four ways:

- **new, fresh**: a link whose request has never run, in a new browser context (an
  empty cache and cookie jar, a new tab);
- **new, repeat**: another new link in the same browser (its HTTP cache warm);
- **confirmed, fresh**: a link whose answer the result cache holds, confirmed (the
  server may serve it to anyone: it comes with the page, backend/app/routes/pages.py),
  in a new browser context;
- **confirmed, repeat**: the same confirmed link again in that browser.

Before each visit the server and its pool's processes are left to settle (``settle``:
under 5% of a CPU for half a second): making a confirmed link and the pool's new
spares keep both CPUs busy for seconds, and a visit measured then timed that work,
not the reader's page. Each visit reports, from the page's own Performance API: the bytes on the wire
(``transferSize`` of the document and every resource: headers and encoded bodies, 0
for what came from the browser's cache, a few hundred bytes for a 304), the encoded
and decoded body bytes (of everything fetched until the network is idle, and of what
was requested before the page was built: the first screen's), the time from navigation to the first ``run`` message sent on
the WebSocket, and to the jaxpr on screen, the earlier of

- **jaxpr painted**: when the browser painted the jaxpr the server rendered in the
  HTML (a confirmed link's ``<pre elementtiming="jaxpr">``, backend/app/web/page.py): the
  Element Timing API's ``renderTime``, the paint itself, whether or not a script ran
  (Chromium drops the entry of an element removed before its paint was presented:
  then the start of the first frame that rendered it visible);
- **jaxpr in pane**: the frame after the page's jaxpr pane first holds a jaxpr;

and the first contentful paint (the Paint Timing API); and where the time to the run
goes: navigation to the document's last byte, to the page's first script having made
its WebSocket (a new link's page: the server's inline script, backend/app/web/early_run.py;
else the entry, boot.ts) and to the WebSocket open. Medians over ``--repeat`` rounds, and
the encodings the server answered with. WebSocket frames are not counted in the bytes.
Each visit also counts the ``run`` frames the page sent: a new link's visit must send
exactly one (the page adopts the run its first script sent, never sends it again; the
benchmark fails otherwise), and says whether that first script was in the page.

    .venv/bin/python benchmarks/page/page_delivery.py [--repeat 5] [--pool zygote|fake] [--entry-sends]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.support.live_server import LiveServer  # noqa: E402
from tests.support.processes import descendants  # noqa: E402

TOKENS = ["page-delivery-a-0123456789", "page-delivery-b-0123456789"]
CODE = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.tanh(x) ** 2) * {c}\n"
ARGS = "(jnp.ones((3,)),)"
TRANSFORMS = [{"name": "grad"}, {"name": "jit"}]
#: the same run, its grad step naming its default option: a link the server's first
#: script does not send (backend/app/web/early_run.py knows no step options), so its run
#: leaves from the page's entry, as every link's did before (``--entry-sends``)
TRANSFORMS_ENTRY = [{"name": "grad", "argnums": 0}, {"name": "jit"}]

#: in the page before its own scripts: when the first run message leaves, and the
#: frame after the jaxpr pane first shows a jaxpr (performance.now(): ms since navigation)
PROBE = """
(() => {
  const send = WebSocket.prototype.send;
  window.__runFrames = 0;
  WebSocket.prototype.send = function (data) {
    if (typeof data === "string" && /"type"\\s*:\\s*"run"/.test(data)) {
      window.__runFrames += 1;
      if (window.__runSentAt === undefined) window.__runSentAt = performance.now();
    }
    return send.call(this, data);
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...a) {
      super(...a);
      if (window.__wsAt === undefined) {
        window.__wsAt = performance.now();
        window.__wsWhile = document.readyState;  // "loading": made by the first script
      }
      this.addEventListener("open", () => {
        if (window.__wsOpenAt === undefined) window.__wsOpenAt = performance.now();
      });
    }
  };
  const shown = () => {
    const pane = document.querySelector("[data-testid=out-jaxpr]");
    return pane !== null && /lambda/.test(pane.textContent || "");
  };
  const watch = new MutationObserver(() => {
    if (window.__jaxprSeen || !shown()) return;
    window.__jaxprSeen = true;
    watch.disconnect();
    requestAnimationFrame(() => { window.__jaxprAt = performance.now(); });
  });
  watch.observe(document, { subtree: true, childList: true, characterData: true });
  // the page built: the first element in its root (main.ts's layout)
  const built = new MutationObserver(() => {
    if (document.querySelector("#app > *") === null) return;
    window.__builtAt = performance.now();
    built.disconnect();
  });
  built.observe(document, { subtree: true, childList: true });
  // the server-rendered jaxpr: its paint (Element Timing: elementtiming="jaxpr"), or,
  // where the browser drops that entry (the element removed before the paint was
  // presented), the first frame that renders it visible (checked before that frame paints)
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (e.identifier === "jaxpr" && window.__staticPaintAt === undefined)
        window.__staticPaintAt = e.renderTime || e.loadTime;
    }
  }).observe({ type: "element", buffered: true });
  const frame = () => {
    const pre = document.querySelector("[data-testid=static-jaxpr]");
    if (pre !== null && pre.checkVisibility() && /lambda/.test(pre.textContent || "")) {
      window.__staticFrameAt = performance.now();
      return;
    }
    if (window.__jaxprAt === undefined) requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (e.name === "first-contentful-paint") window.__fcpAt = e.startTime;
    }
  }).observe({ type: "paint", buffered: true });
})();
"""

SIZES = """
() => {
  const all = [...performance.getEntriesByType("navigation"),
               ...performance.getEntriesByType("resource")];
  const sum = (k) => all.reduce((n, e) => n + (e[k] || 0), 0);
  const first = all.filter((e) => e.startTime <= (window.__builtAt ?? Infinity));
  return { wire: sum("transferSize"), encoded: sum("encodedBodySize"),
           decoded: sum("decodedBodySize"), files: all.length,
           firstDecoded: first.reduce((n, e) => n + (e.decodedBodySize || 0), 0),
           firstFiles: first.length,
           document: all[0] ? all[0].transferSize : null,
           documentAt: all[0] ? all[0].responseEnd : null };
}
"""


def _cpu_ticks(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, ValueError, IndexError):
            continue
    return total


def settle(server_pid: int, within_s: float = 60.0, window_s: float = 0.5) -> float:
    """Waits until the server and everything under it (its pool's jails) are idle:
    under 5% of a CPU over ``window_s``. A visit measures a reader's page against a
    server at rest, not against the work the benchmark itself just gave it (making a
    confirmed link runs it in several tenants and a pristine run; the pool then starts
    spares: seconds of both CPUs). Returns the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < within_s:
        pids = descendants(server_pid) | {server_pid}
        before = _cpu_ticks(pids)
        time.sleep(window_s)
        used = (_cpu_ticks(pids) - before) / os.sysconf("SC_CLK_TCK")
        if used < 0.05 * window_s:
            break
    return time.monotonic() - started


def snippet(client: httpx.Client, c: str, entry_sends: bool = False) -> tuple[str, dict[str, Any]]:
    body = {
        "code": CODE.format(c=c),
        "args": ARGS,
        "transforms": TRANSFORMS_ENTRY if entry_sends else TRANSFORMS,
        "timeout_s": 60,  # a new tenant's first run on a busy machine can take 20 s
    }
    r = client.post("/api/v1/snippets", json=body)
    r.raise_for_status()
    return str(r.json()["id"]), body


def confirmed_snippet(client: httpx.Client, c: str, within_s: float = 300) -> str:
    """A link whose page carries its answer: run by two tenants (and, where the server
    confirms with a pristine run of its own, after that), until the page holds it."""
    sid, body = snippet(client, c)
    deadline = time.monotonic() + within_s
    for token in TOKENS:
        while True:  # a run that did not end ok (killed on a busy machine) is no evidence
            r = client.post(
                "/api/v1/runs", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=120
            )
            r.raise_for_status()
            done = r.json()["events"][-1]
            if done["status"] == "ok":
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"/s/{sid}: its runs do not end ok: {done}")
    while 'id="jaxplay-initial"' not in client.get(f"/s/{sid}").text:
        if time.monotonic() > deadline:
            raise RuntimeError(f"/s/{sid} never carried a confirmed answer")
        time.sleep(0.25)
    return sid


def visit(page: Any, url: str, encodings: Counter[str], timeout_s: float) -> dict[str, Any]:
    seen: list[Any] = []

    def note(response: Any) -> None:
        seen.append(response)

    page.on("response", note)
    page.goto(url)
    try:
        page.wait_for_function("() => window.__jaxprAt !== undefined", timeout=timeout_s * 1000)
    except Exception as exc:  # no jaxpr in time: say what the page shows instead
        shown = page.evaluate("() => document.body.innerText.slice(0, 2000)")
        raise RuntimeError(f"{url}: no jaxpr on screen within {timeout_s:g} s; {shown}") from exc
    try:
        page.wait_for_load_state("networkidle", timeout=5000)
    except Exception:  # a page still fetching after 5 s: measured as it is
        pass
    page.remove_listener("response", note)
    origin = url.split("/s/")[0]
    for response in seen:
        if response.url.startswith(origin):
            path = response.url[len(origin) :].split("?")[0]
            if path.startswith("/assets/"):
                kind = "asset ." + path.rsplit(".", 1)[-1]
            elif path.startswith(("/s/", "/e/")):
                kind = "page"
            else:
                kind = path
            encoding = response.headers.get("content-encoding", "identity")
            encodings[f"{kind}:{response.status}:{encoding}"] += 1
    result: dict[str, Any] = page.evaluate(SIZES)
    result["script_ms"] = page.evaluate("() => window.__wsAt ?? null")
    result["ws_open_ms"] = page.evaluate("() => window.__wsOpenAt ?? null")
    result["run_sent_ms"] = page.evaluate("() => window.__runSentAt ?? null")
    result["run_frames"] = page.evaluate("() => window.__runFrames ?? 0")
    result["early_script"] = page.evaluate(
        "() => document.getElementById('jaxplay-early') !== null && window.__wsWhile === 'loading'"
    )
    result["fcp_ms"] = page.evaluate("() => window.__fcpAt ?? null")
    result["static_ms"] = page.evaluate(
        "() => window.__staticPaintAt ?? window.__staticFrameAt ?? null"
    )
    result["pane_ms"] = page.evaluate("() => window.__jaxprAt")
    result["jaxpr_ms"] = min(v for v in (result["static_ms"], result["pane_ms"]) if v is not None)
    return result


def median(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    missing = len(values) - len(present)
    text = f"{statistics.median(present):,.0f}"
    return text + (f" ({missing} none)" if missing else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pool", default="zygote", help="the server's pool (fake: no JAX)")
    parser.add_argument("--dist", type=Path, default=ROOT / "frontend" / "dist")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait per visit")
    parser.add_argument(
        "--entry-sends",
        action="store_true",
        help="new links whose run the page's entry sends (no first script: as before issue 27)",
    )
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    results: dict[str, list[dict[str, Any]]] = {}
    settled: list[float] = []
    encodings: Counter[str] = Counter()
    stamp = str(int(time.time()))
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(
            Path(tmp) / "jaxplay.sqlite3",
            "--pool",
            args.pool,
            "--frontend-dist",
            str(args.dist),
            env={
                "JAXPLAY_API_TOKENS": json.dumps(TOKENS),
                "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
                "JAXPLAY_LOG_LEVEL": "info",  # the run and confirm lines, should one fail
            },
        ).start(timeout_s=120)
        try:
            with httpx.Client(base_url=server.url, timeout=30) as client, sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for i in range(args.repeat):
                    linked = confirmed_snippet(client, f"{stamp}{i}.5")
                    new_ids = [
                        snippet(client, f"{stamp}{i}.{k}", args.entry_sends)[0] for k in (1, 2)
                    ]
                    for kind, ids in (("new", new_ids), ("confirmed", [linked, linked])):
                        context = browser.new_context(viewport={"width": 1440, "height": 900})
                        context.add_init_script(PROBE)
                        page = context.new_page()
                        for visit_kind, sid in zip(("fresh", "repeat"), ids, strict=True):
                            url = f"{server.url}/s/{sid}"
                            settled.append(settle(server.pid))
                            got = visit(page, url, encodings, args.timeout)
                            results.setdefault(f"{kind}, {visit_kind}", []).append(got)
                        context.close()
                    print(f"round {i + 1}/{args.repeat} done", file=sys.stderr)
                browser.close()
        except Exception:
            lines = [ln for ln in server.log.read_text().splitlines() if "jaxplay.http" not in ln]
            print("\n".join(lines[-40:]), file=sys.stderr)  # the server's side of it
            raise
        finally:
            server.stop()

    sends = "the entry" if args.entry_sends else "the page's first script where it can"
    print(
        f"page delivery, {args.repeat} rounds, pool {args.pool}, new links' runs sent by {sends} (medians)"
    )
    print(
        f"before each visit the server and its pool were left to settle (under 5% of a CPU): "
        f"median {statistics.median(settled):.1f} s, longest {max(settled):.1f} s"
    )
    head = (
        "visit",
        "wire B",
        "encoded B",
        "decoded B",
        "first screen decoded B",
        "document B",
        "document ms",
        "socket made ms",
        "socket open ms",
        "run sent ms",
        "first paint ms",
        "jaxpr painted ms",
        "jaxpr in pane ms",
        "jaxpr on screen ms",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, rows in results.items():
        cells = [
            median([r["wire"] for r in rows]),
            median([r["encoded"] for r in rows]),
            median([r["decoded"] for r in rows]),
            median([r["firstDecoded"] for r in rows]),
            median([r["document"] for r in rows]),
            median([r["documentAt"] for r in rows]),
            median([r["script_ms"] for r in rows]),
            median([r["ws_open_ms"] for r in rows]),
            median([r["run_sent_ms"] for r in rows]),
            median([r["fcp_ms"] for r in rows]),
            median([r["static_ms"] for r in rows]),
            median([r["pane_ms"] for r in rows]),
            median([r["jaxpr_ms"] for r in rows]),
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    fresh = [r["wire"] for r in results.get("new, fresh", [])]
    repeat = [r["wire"] for r in results.get("new, repeat", [])]
    # a new link runs once (the page adopts the run its first script sent: one frame);
    # a confirmed one is painted from the page (no frame), then runs for its timings
    for name, rows in results.items():
        frames = [r["run_frames"] for r in rows]
        early = sum(1 for r in rows if r["early_script"])
        print(
            f"{name}: run frames sent per visit {frames}; sent by the page's first script: "
            f"{early} of {len(rows)}"
        )
    new_frames = [r["run_frames"] for k, rs in results.items() if k.startswith("new") for r in rs]
    if any(n != 1 for n in new_frames):
        print(f"FAIL: a new link's visit sent {new_frames} run frames, not exactly one each")
        failed = True
    else:
        failed = False
    if fresh and repeat:
        ratio = statistics.median(repeat) / max(1, statistics.median(fresh))
        print(f"repeat visit / fresh visit, bytes on the wire: {ratio:.3f}")
    print(
        "answers (kind:status:encoding count): "
        + ", ".join(f"{k} {v}" for k, v in sorted(encodings.items()))
    )
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
