"""The floor under the page's speed: how soon a WebSocket client gets a run's jaxpr
when it does nothing else — the Python client, and Chromium from a bare page (no
jaxplay script on it) — side by side against one server, one run at a time.

What the page adds over this floor is the page's own main thread (benchmarks/page/page_speed.py
measures the page; docs/frontend.md, "Speed"). Chromium is run three ways: plain, with
DevTools' network events on (as page_speed.py's "net" column reads them), and with
Playwright's WebSocket listener (as page_speed.py captures the run frames), to show
whether the measuring itself costs anything.

    .venv/bin/python benchmarks/page/page_ws_floor.py [--pool zygote|fake] [--repeat 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.page.page_speed import TOKEN, Api, load_average  # noqa: E402
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.support.live_server import LiveServer  # noqa: E402

REQUEST: dict[str, Any] = {
    "code": "import jax.numpy as jnp\n\n\ndef f(x):\n    return jnp.sin(x) * 2\n",
    "args": "(1.0,)",
    "outputs": ["jaxpr", "stablehlo", "hlo"],
}

#: in the bare page: send each run, time its first jaxpr message, wait for its done
BROWSER_RUNS = """async ([url, request, n]) => {
  const ws = new WebSocket(url);
  await new Promise((ok) => (ws.onmessage = () => ok()));  // the hello
  const times = [];
  for (let i = 0; i < n; i++) {
    const seq = 100 + i;
    const until = (kind) => new Promise((ok) => (ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.seq === seq && m.payload && m.payload.type === kind) ok(performance.now());
    }));
    const t0 = performance.now();
    const jaxpr = until("jaxpr");
    const code = request.code + "\\n# browser " + i + " " + Math.random();
    ws.send(JSON.stringify({ type: "run", seq, payload: { ...request, code } }));
    times.push((await jaxpr) - t0);
    await until("done");
    await new Promise((ok) => setTimeout(ok, 300));
  }
  ws.close();
  return times;
}"""


def row(name: str, times: list[float]) -> str:
    return f"| {name} | {statistics.median(times):.1f} | {max(times):.1f} | {len(times)} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", default="zygote", help="the server's pool (fake: no JAX)")
    parser.add_argument("--repeat", type=int, default=12, help="runs per client")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    load_before = load_average()
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(
            Path(tmp) / "jaxplay.sqlite3",
            "--pool",
            args.pool,
            env={"JAXPLAY_API_TOKENS": json.dumps([TOKEN]), "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0"},
        ).start(timeout_s=120)
        try:
            api = Api(server.url)
            api.run({**REQUEST, "code": REQUEST["code"] + "\n# warm\n"})  # its tenant warm
            times = []
            for i in range(args.repeat):
                jaxpr_ms, _, _ = api.run({**REQUEST, "code": REQUEST["code"] + f"\n# {i}\n"})
                times.append(jaxpr_ms)
                time.sleep(0.3)
            api.close()
            rows.append(row("Python client (websockets)", times))
            url = server.url.replace("http", "ws", 1) + f"/api/v1/ws?token={TOKEN}"
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for variant in ("plain", "DevTools network events", "Playwright's listener"):
                    context = browser.new_context()
                    page = context.new_page()
                    if variant == "DevTools network events":
                        cdp = context.new_cdp_session(page)
                        cdp.on("Network.webSocketFrameReceived", lambda params: None)
                        cdp.send("Network.enable")
                    elif variant == "Playwright's listener":
                        page.on("websocket", lambda ws: ws.on("framesent", lambda f: None))
                    page.goto(server.url + "/healthz")  # same origin, no page script
                    # the first run warms this tenant; the rest are timed
                    times = page.evaluate(BROWSER_RUNS, [url, REQUEST, args.repeat + 1])[1:]
                    rows.append(row(f"Chromium, bare page, {variant}", times))
                    context.close()
                browser.close()
        finally:
            server.stop()
    print(
        f"WebSocket floor: request sent -> its jaxpr event, pool {args.pool}, ms; "
        f"load average {load_before} before, {load_average()} after (1, 5, 15 min)"
    )
    print("| client | median | max | runs |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
