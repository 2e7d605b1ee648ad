"""What the MCP endpoint adds to a run: the same request through ``POST /api/v1/runs``
and through the ``run`` tool of ``/mcp`` (the official SDK's client, one session),
side by side against one live ``jaxplay serve`` on the real (unjailed subprocess) pool.

    .venv/bin/python benchmarks/server/mcp_overhead.py [--rounds 20]

The request runs and is shared first, until its answer is confirmed (the cache's answer
is then what both doors serve, so the figures are the doors' own cost, not JAX's). Prints the median and p95 of each, in
ms, and their difference. Depends on the machine's load: say so when quoting it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.support.stats import percentile
from tests.support.live_server import LiveServer

REQUEST = {
    "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.tanh(x) ** 2)\n",
    "args": "(jnp.ones((3,)),)",
    "transforms": [{"name": "grad"}],
    "outputs": ["jaxpr", "hlo", "value"],
}


async def measure(url: str, rounds: int) -> tuple[list[float], list[float]]:
    rest: list[float] = []
    agent: list[float] = []
    http = httpx2.AsyncClient(timeout=httpx2.Timeout(120.0))
    async with (
        httpx.AsyncClient(timeout=120) as plain,
        Client(streamable_http_client(url + "/mcp", http_client=http)) as client,
    ):
        for _ in range(rounds):  # alternated, so load drifts touch both alike
            t = time.perf_counter()
            r = await plain.post(url + "/api/v1/runs", json=REQUEST)
            rest.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, r.text
            t = time.perf_counter()
            result = await client.call_tool("run", REQUEST)
            agent.append((time.perf_counter() - t) * 1000)
            assert not result.is_error and result.structured_content["cached"], result.content
    return rest, agent


def confirmed(url: str) -> None:
    """Run the request, share it (its answer's pristine run starts), and wait until the
    cache serves it: a confirmed answer is what anyone asking gets."""
    httpx.post(url + "/api/v1/runs", json=REQUEST, timeout=120).raise_for_status()
    httpx.post(url + "/api/v1/snippets", json=REQUEST, timeout=120).raise_for_status()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        events = httpx.post(url + "/api/v1/runs", json=REQUEST, timeout=120).json()["events"]
        if events[-1].get("cached"):
            return
        time.sleep(1)
    raise SystemExit("the answer was never confirmed")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as tmp:
        env = {"JAXPLAY_PROBE_ON_START": "false", "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0"}
        server = LiveServer(Path(tmp) / "b.sqlite3", "--pool", "subprocess", "--unsafe-no-jail",
                            env=env).start()  # fmt: skip
        try:
            confirmed(server.url)
            rest, agent = asyncio.run(measure(server.url, rounds))
        finally:
            server.stop()
    for name, samples in (("REST POST /api/v1/runs", rest), ("MCP tools/call run", agent)):
        print(
            f"{name:24} median {statistics.median(samples):7.1f} ms  p95 {percentile(samples, 0.95):7.1f} ms"
        )
    print(f"MCP minus REST (medians): {statistics.median(agent) - statistics.median(rest):.1f} ms")
    return 0


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    raise SystemExit(main())
