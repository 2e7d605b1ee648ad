"""The soak's clients (benchmarks/server/soak.py) and the ledger every answer is checked
against.

Each kind of client is one loop at a steady pace, each person at an address of its
own (``X-Forwarded-For`` from the loopback, a trusted proxy, as behind a load
balancer): page sessions editing over the WebSocket (and sharing now and then), a
script over REST (JSON and NDJSON), ``jaxplay run --server`` as a user types it, a
sharer and readers of links (a fixed set that gets confirmed, and new ones that are
not yet), MCP tool calls, across-versions runs when a second version is installed,
and bad input of the kinds the hostile battery sends.

The ledger holds the soak's promises: every run sent gets exactly one ``done``, last,
or a clean refusal (429/503 with ``Retry-After``); no run id is answered twice; no
answer is a 500; a storage error happens only while a fault step has the database
down, and says so; every snippet reads back as it was stored; every answer served
from the cache equals a fresh run's (checked at the end, ``check_cached``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets

from backend.app.trust.cache import CACHED_TYPES

OUTPUTS = ["jaxpr", "stablehlo", "hlo", "value", "cost"]
TOOLS_TOKEN = "soak-tools-0123456789"  # the CLI, MCP, across and the end's fresh runs


def script_token(i: int) -> str:
    return f"soak-script-{i}-0123456789"


def request_for(tag: str, n: int, outputs: list[str] | None = None) -> dict[str, Any]:
    """A small ``grad`` + ``jit`` program; ``tag`` and ``n`` make it an edit of its own."""
    return {
        "code": (
            "import jax.numpy as jnp\n\n"
            f"def f(x):  # {tag}\n"
            f"    return jnp.sum(jnp.tanh(x * {1 + n / 1000!r}) ** 2)\n"
        ),
        "args": "(jnp.arange(4.0),)",
        "transforms": [{"name": "grad"}, {"name": "jit"}],
        "outputs": outputs or OUTPUTS,
        "timeout_s": 30,
    }


def shown(events: list[dict[str, Any]]) -> str:
    """What an answer showed, as the cache compares it (backend/app/trust/cache.py)."""
    kept = [e for e in events[1:-1] if e.get("type") in CACHED_TYPES]
    return json.dumps(kept, sort_keys=True, separators=(",", ":"))


@dataclass
class Ledger:
    failures: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    run_ids: set[str] = field(default_factory=set)
    #: send -> answer, per route, since the last sample (the sampler takes them)
    window: dict[str, list[float]] = field(default_factory=dict)
    latency: dict[str, list[float]] = field(default_factory=dict)
    snippets: dict[str, Any] = field(default_factory=dict)  # id -> the request as stored
    cached: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    #: fault steps: [start, end (0 until undone), kind] (monotonic)
    outages: list[list[Any]] = field(default_factory=list)
    ok_in_outage: Counter[int] = field(default_factory=Counter)

    def fail(self, what: str) -> None:
        self.counts["failures"] += 1
        if len(self.failures) < 200:
            self.failures.append(f"{time.strftime('%H:%M:%S')} {what}")

    def took(self, route: str, seconds: float) -> None:
        self.window.setdefault(route, []).append(seconds)
        self.latency.setdefault(route, []).append(seconds)

    def take_window(self) -> dict[str, list[float]]:
        window, self.window = self.window, {}
        return window

    def in_outage(
        self, grace_s: float = 3.0, kinds: tuple[str, ...] = ("stop", "kill")
    ) -> int | None:
        """The fault step of ``kinds`` (PostgreSQL's, by default) under way now (or
        ended less than ``grace_s`` ago), if any."""
        now = time.monotonic()
        for i, (start, end, kind) in enumerate(self.outages):
            if kind in kinds and start <= now <= (end or now) + grace_s:
                return i
        return None

    def answer(self, who: str, events: list[dict[str, Any]], want: str = "ok") -> bool:
        """Check one run's whole answer; True when it ended ``want``."""
        self.counts["answers"] += 1
        dones = [i for i, e in enumerate(events) if e.get("type") == "done"]
        if len(dones) != 1 or dones[0] != len(events) - 1:
            self.fail(f"{who}: {len(dones)} done events, the last at {dones[-1:]} of {len(events)}")
            return False
        status = events[-1].get("status")
        # Redis or the worker killed under it: its run ends saying so (the queue's own
        # tests hold what it says), and runs queued meanwhile may time out before any
        # worker accepted them (a lone done, saying so).
        fault = self.in_outage(grace_s=30, kinds=("redis", "worker"))
        if status != want and fault is not None and status in ("killed", "error"):
            self.refused[
                f"run ended {status} in the {self.outages[fault][2]} fault (expected)"
            ] += 1
            return False
        first = events[0]
        if first.get("type") != "accepted" or not first.get("run_id"):
            self.fail(f"{who}: the answer does not start with accepted: {first}")
            return False
        if first["run_id"] in self.run_ids:
            self.fail(f"{who}: run {first['run_id']} answered twice")
        self.run_ids.add(first["run_id"])
        if status != want:
            self.fail(f"{who}: ended {status} ({events[-1].get('reason', '')[:200]})")
            return False
        if events[-1].get("cached"):
            self.counts["cached"] += 1
        if (
            outage := self.in_outage(grace_s=0, kinds=("stop", "kill", "redis", "worker"))
        ) is not None:
            self.ok_in_outage[outage] += 1
        return True

    def refusal(self, who: str, status: int, body: Any, retry_after: str | None) -> float:
        """A 429/503 (or a storage error during an outage): counted, and how long to
        wait; anything else is a failure (and 1 s)."""
        error = body.get("error", "") if isinstance(body, dict) else ""
        if status in (429, 503) and retry_after is None:
            self.fail(f"{who}: {status} {error} without Retry-After")
            return 1.0
        if error in ("storage_unavailable", "storage_full"):
            if self.in_outage() is None:
                self.fail(f"{who}: {status} {error} with the database up: {body}")
            else:
                self.refused[f"{status} {error} (database down: expected)"] += 1
            return 1.0
        if status in (429, 503):
            self.refused[f"{status} {error or body.get('message', '')[:40]}"] += 1
            return float(retry_after or 1)
        self.fail(f"{who}: {status} {str(body)[:300]}")
        return 1.0


@dataclass
class Soak:
    url: str
    ledger: Ledger
    end: float  # monotonic
    rng: random.Random = field(default_factory=lambda: random.Random(52))
    links: list[str] = field(default_factory=list)  # the fixed set, confirmed over time
    new_links: list[str] = field(default_factory=list)  # one a minute, not yet confirmed

    @property
    def ws_url(self) -> str:
        return self.url.replace("http", "ws", 1) + "/api/v1/ws"

    def running(self) -> bool:
        return time.monotonic() < self.end

    async def pause(self, seconds: float) -> None:
        """Sleep about ``seconds`` (±30 %), never past the end."""
        left = self.end - time.monotonic()
        await asyncio.sleep(max(0.0, min(left, seconds * self.rng.uniform(0.7, 1.3))))

    def client(self, address: str, **headers: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url, timeout=120, headers={"X-Forwarded-For": address, **headers}
        )

    async def share(self, http: httpx.AsyncClient, who: str, request: dict[str, Any]) -> str | None:
        started = time.monotonic()
        r = await http.post("/api/v1/snippets", json=request)
        if r.status_code != 201:
            await asyncio.sleep(
                self.ledger.refusal(who, r.status_code, _json(r), r.headers.get("retry-after"))
            )
            return None
        self.ledger.took("share", time.monotonic() - started)
        snippet_id = str(r.json()["id"])
        got = await http.get(f"/api/v1/snippets/{snippet_id}")
        if got.status_code == 200:
            stored = got.json()
            if self.ledger.snippets.setdefault(snippet_id, stored) != stored:
                self.ledger.fail(f"{who}: snippet {snippet_id} changed: {stored}")
        else:
            self.ledger.refusal(who, got.status_code, _json(got), got.headers.get("retry-after"))
        return snippet_id


def _json(r: httpx.Response) -> Any:
    try:
        return r.json()
    except ValueError:
        return {"error": "not JSON", "message": r.text[:200]}


# --- page sessions --------------------------------------------------------------------


async def page_session(soak: Soak, i: int, think_s: float) -> None:
    address = f"10.52.1.{i + 1}"
    n = 0
    while soak.running():
        async with soak.client(address) as http:
            page = await http.get("/")
            cookie = "; ".join(f"{k}={v}" for k, v in page.cookies.items())
            headers = {"Cookie": cookie, "Origin": soak.url, "X-Forwarded-For": address}
            try:
                async with websockets.connect(
                    soak.ws_url, additional_headers=headers, open_timeout=30, max_size=2**24
                ) as ws:
                    hello = json.loads(await asyncio.wait_for(ws.recv(), 30))
                    assert hello["type"] == "hello", hello
                    while soak.running():
                        n += 1
                        request = request_for(f"page {i}", n)
                        await ws_run(soak, ws, f"page {i} run {n}", n, request)
                        if n % 8 == 0:
                            await soak.share(http, f"page {i} share", request)
                        await soak.pause(think_s)
            except (OSError, TimeoutError, websockets.WebSocketException) as exc:
                soak.ledger.fail(f"page {i} run {n}: {type(exc).__name__}: {exc}")
                await soak.pause(2)


async def ws_run(soak: Soak, ws: Any, who: str, seq: int, request: dict[str, Any]) -> None:
    sent = time.monotonic()
    await ws.send(json.dumps({"type": "run", "seq": seq, "payload": request}))
    events: list[dict[str, Any]] = []
    first_jaxpr = None
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), 120))
        if message.get("seq") != seq:
            soak.ledger.fail(f"{who}: a message of seq {message.get('seq')}: {str(message)[:200]}")
            continue
        if message["type"] == "error":
            error = message["payload"]
            retry = error.get("retry_after_s")
            wait = soak.ledger.refusal(
                who, int(error.get("status") or 0), error, None if retry is None else str(retry)
            )
            await asyncio.sleep(min(wait, 30))
            return
        event = message["payload"]
        events.append(event)
        if event["type"] == "jaxpr" and first_jaxpr is None:
            first_jaxpr = time.monotonic() - sent
        if event["type"] == "done":
            break
    if soak.ledger.answer(who, events):
        soak.ledger.took("ws_run", time.monotonic() - sent)
        if first_jaxpr is not None:
            soak.ledger.took("ws_first_jaxpr", first_jaxpr)


# --- scripts, the CLI -----------------------------------------------------------------


async def rest_run(
    soak: Soak, http: httpx.AsyncClient, who: str, request: dict[str, Any], stream: bool
) -> tuple[list[dict[str, Any]], float] | None:
    """One run over REST (``stream``: NDJSON); its checked answer and how long it
    took, or None (refused: waited its Retry-After; or failed)."""
    sent = time.monotonic()
    headers = {"Accept": "application/x-ndjson"} if stream else {}
    async with http.stream("POST", "/api/v1/runs", json=request, headers=headers) as r:
        body = await r.aread()
    if r.status_code != 200:
        parsed = json.loads(body) if body.startswith(b"{") else {"message": body[:200].decode()}
        wait = soak.ledger.refusal(who, r.status_code, parsed, r.headers.get("retry-after"))
        await asyncio.sleep(min(30, wait))
        return None
    if stream:
        events = [json.loads(line) for line in body.splitlines() if line.strip()]
    else:
        events = json.loads(body)["events"]
    if soak.ledger.answer(who, events):
        return events, time.monotonic() - sent
    return None


async def script(soak: Soak, i: int, every_s: float) -> None:
    n = 0
    auth = {"Authorization": f"Bearer {script_token(i)}"}
    async with soak.client(f"10.52.5.{i + 1}", **auth) as http:
        while soak.running():
            n += 1
            stream = n % 2 == 0
            request = request_for(f"script {i}", n)
            if answered := await rest_run(soak, http, f"script {i} run {n}", request, stream):
                soak.ledger.took("rest_run", answered[1])
            await soak.pause(every_s)


async def cli(soak: Soak, every_s: float, workdir: Path) -> None:
    jaxplay = Path(sys.executable).with_name("jaxplay")
    n = 0
    await soak.pause(every_s / 3)
    while soak.running():
        n += 1
        request = request_for("cli", n, ["jaxpr", "value"])
        file = workdir / "soak_cli.py"
        file.write_text(request["code"])
        argv = [str(jaxplay), "run", str(file), "--args", request["args"], "--transform", "grad",
                "--transform", "jit", "--output", "jaxpr", "--output", "value", "--json",
                "--server", soak.url, "--token", TOOLS_TOKEN]  # fmt: skip
        sent = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await proc.communicate()
        lines = [json.loads(x) for x in out.decode().splitlines() if x.startswith("{")]
        if proc.returncode != 0 and b"429" not in err and b"503" not in err:
            soak.ledger.fail(f"cli run {n}: exit {proc.returncode}: {err.decode()[-300:]}")
        elif proc.returncode == 0 and soak.ledger.answer(f"cli run {n}", lines):
            soak.ledger.took("cli_run", time.monotonic() - sent)
        else:
            soak.ledger.refused["cli: refused (429/503)"] += 1
        await soak.pause(every_s)


# --- links: a sharer, readers ---------------------------------------------------------


async def sharer(soak: Soak, fixed: int, new_every_s: float) -> None:
    async with soak.client("10.52.2.1") as http:
        await http.get("/")  # a page session's cookie, as the Share button has
        for k in range(fixed):
            while soak.running():
                made = await soak.share(http, f"link {k}", request_for("link", k))
                if made:
                    soak.links.append(made)
                    break
        n = 0
        while soak.running():
            await soak.pause(new_every_s)
            n += 1
            made = await soak.share(http, f"new link {n}", request_for("new link", n))
            if made:
                soak.new_links.append(made)


async def reader(soak: Soak, every_s: float) -> None:
    n = 0
    while soak.running():
        await soak.pause(every_s)
        pool = soak.links if soak.rng.random() < 0.8 or not soak.new_links else soak.new_links[-2:]
        if not pool:
            continue
        n += 1
        snippet_id = soak.rng.choice(pool)
        async with soak.client(f"10.52.3.{n % 250 + 1}") as http:  # a new visitor
            started = time.monotonic()
            page = await http.get(f"/s/{snippet_id}")
            if page.status_code != 200:
                soak.ledger.refusal(
                    f"reader {n} page",
                    page.status_code,
                    _json(page),
                    page.headers.get("retry-after"),
                )
                continue
            soak.ledger.took("link_page", time.monotonic() - started)
            got = await http.get(f"/api/v1/snippets/{snippet_id}")
            if got.status_code != 200:
                soak.ledger.refusal(
                    f"reader {n} snippet",
                    got.status_code,
                    _json(got),
                    got.headers.get("retry-after"),
                )
                continue
            request = got.json()
            if request != soak.ledger.snippets.get(snippet_id, request):
                soak.ledger.fail(f"reader {n}: snippet {snippet_id} changed")
            answered = await rest_run(soak, http, f"reader {n}", request, stream=False)
            if answered is None:
                continue
            events, seconds = answered
            if events[-1].get("cached"):  # a confirmed answer: checked at the end
                soak.ledger.took("reader_cached", seconds)
                key = json.dumps(request, sort_keys=True)
                soak.ledger.cached.setdefault(key, (request, shown(events)))
            else:
                soak.ledger.took("reader_run", seconds)


# --- MCP, across versions, bad input --------------------------------------------------


async def mcp(soak: Soak, every_s: float) -> None:
    n = 0
    headers = {
        "Authorization": f"Bearer {TOOLS_TOKEN}",
        "Accept": "application/json, text/event-stream",
    }
    async with soak.client("10.52.6.1", **headers) as http:
        while soak.running():
            await soak.pause(every_s)
            n += 1
            tool, arguments = [
                ("run", request_for("mcp", n, ["jaxpr", "value"])),
                ("share", request_for("mcp share", n % 5)),
                ("versions", {}),
            ][n % 3]
            call = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}}  # fmt: skip
            started = time.monotonic()
            r = await http.post("/mcp", json=call)
            if r.status_code != 200:
                soak.ledger.refusal(
                    f"mcp {tool}", r.status_code, _json(r), r.headers.get("retry-after")
                )
                continue
            result = _mcp_result(r)
            if result is None or result.get("isError"):
                content = (result or {}).get("structuredContent") or {}
                if (
                    content.get("status") in (429, 503)
                    or content.get("error") == "storage_unavailable"
                ):
                    soak.ledger.refusal(f"mcp {tool}", int(content.get("status", 503)), content,
                                        str(content.get("retry_after_s", 1)))  # fmt: skip
                else:
                    soak.ledger.fail(f"mcp {tool}: {str(result)[:300]}")
                continue
            soak.ledger.counts[f"mcp {tool}"] += 1
            soak.ledger.took("mcp", time.monotonic() - started)


def _mcp_result(r: httpx.Response) -> dict[str, Any] | None:
    text = r.text
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        datas = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = datas[-1] if datas else "{}"
    message = json.loads(text)
    result = message.get("result")
    return result if isinstance(result, dict) else None


async def across(soak: Soak, versions: list[str], every_s: float) -> None:
    n = 0
    async with soak.client("10.52.7.1", Authorization=f"Bearer {TOOLS_TOKEN}") as http:
        while soak.running():
            await soak.pause(every_s)
            n += 1
            started = time.monotonic()
            body = {
                "request": request_for("across", n, ["jaxpr", "value"]),
                "versions": versions[:2],
            }
            r = await http.post("/api/v1/across", json=body)
            if r.status_code != 200:
                soak.ledger.refusal(
                    f"across {n}", r.status_code, _json(r), r.headers.get("retry-after")
                )
                continue
            statuses = [v.get("status") for v in r.json().get("versions", [])]
            if statuses != ["ok"] * len(statuses) or not statuses:
                soak.ledger.fail(f"across {n}: {statuses}")
            else:
                soak.ledger.took("across", time.monotonic() - started)


BAD_INPUTS: list[tuple[str, str, Any, set[int]]] = [
    ("not JSON", "/api/v1/runs", b"{not json", {422}),
    ("unknown transform", "/api/v1/runs", {"code": "def f(x):\n    return x\n", "transforms": [{"name": "nope"}]}, {422}),
    ("code over 64 KiB", "/api/v1/runs", {"code": "x = 1\n" * 20000}, {413}),
    ("a lone surrogate", "/api/v1/runs", b'{"code": "def f():\\n    return \\"\\ud800\\"\\n"}', {422}),
    ("an unknown field", "/api/v1/snippets", {"code": "x = 1\n", "nope": 1}, {422}),
    ("a snippet id that is none", "/api/v1/snippets/zzzzzzzzzzzz", None, {404}),
]  # fmt: skip


async def bad_input(soak: Soak, every_s: float) -> None:
    n = 0
    while soak.running():
        await soak.pause(every_s)
        n += 1
        what, path, body, expected = BAD_INPUTS[n % len(BAD_INPUTS)]
        async with soak.client(f"10.52.4.{n % 250 + 1}") as http:
            if body is None:
                r = await http.get(path)
            elif isinstance(body, bytes):
                r = await http.post(
                    path, content=body, headers={"Content-Type": "application/json"}
                )
            else:
                r = await http.post(path, json=body)
        parsed = _json(r)
        if r.status_code in expected:
            if r.status_code >= 400 and not (isinstance(parsed, dict) and parsed.get("error")):
                soak.ledger.fail(
                    f"bad input ({what}): {r.status_code} without the error shape: {r.text[:200]}"
                )
            soak.ledger.counts["bad input answered as documented"] += 1
        elif r.status_code in (429, 503):
            soak.ledger.refusal(
                f"bad input ({what})", r.status_code, parsed, r.headers.get("retry-after")
            )
        else:
            soak.ledger.fail(
                f"bad input ({what}): {r.status_code} (wanted {sorted(expected)}): {r.text[:200]}"
            )


# --- the end's checks -----------------------------------------------------------------


async def check_snippets(soak: Soak) -> int:
    """Every snippet the soak made reads back as it was stored; how many."""
    async with soak.client("10.52.8.1") as http:
        for snippet_id, stored in list(soak.ledger.snippets.items()):
            for _ in range(10):
                got = await http.get(f"/api/v1/snippets/{snippet_id}")
                if got.status_code == 429:
                    await asyncio.sleep(float(got.headers.get("retry-after", 1)))
                    continue
                break
            if got.status_code != 200 or got.json() != stored:
                soak.ledger.fail(f"snippet {snippet_id}: {got.status_code}, lost or changed")
    return len(soak.ledger.snippets)


async def check_cached(soak: Soak, most: int = 12) -> int:
    """Each answer served from the cache during the soak, and the answer served for
    its request now (a new reader's), against a fresh run of it (``cache: false``);
    how many requests were compared."""
    compared = 0
    async with soak.client("10.52.9.1", Authorization=f"Bearer {TOOLS_TOKEN}") as http:
        for n, (request, served) in enumerate(list(soak.ledger.cached.values())[:most]):
            for _ in range(5):
                fresh = await rest_run(soak, http, "fresh run", {**request, "cache": False}, False)
                if fresh is not None:
                    break
            else:
                soak.ledger.fail("fresh run: refused five times")
                continue
            compared += 1
            code = request["code"][:80]
            if shown(fresh[0]) != served:
                soak.ledger.fail(f"a cached answer differs from a fresh run: {code!r}")
            async with soak.client(f"10.52.12.{n + 1}") as reader:  # still served, still equal
                now = await rest_run(soak, reader, "a reader at the end", request, False)
            if now is not None and now[0][-1].get("cached") and shown(now[0]) != shown(fresh[0]):
                soak.ledger.fail(f"the answer served now differs from a fresh run: {code!r}")
            elif now is not None and not now[0][-1].get("cached"):
                soak.ledger.counts["confirmed answers no longer served (trimmed)"] += 1
    return compared


async def steady(coroutine: Any, soak: Soak, name: str) -> None:
    """One client's loop; an unexpected exception is a failure, and the loop restarts."""
    while soak.running():
        try:
            await coroutine()
            return
        except Exception as exc:  # whatever it was (a dropped socket, a malformed
            # answer, an assertion on one), it is the soak's failure, never its end
            soak.ledger.fail(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
            with contextlib.suppress(Exception):
                await soak.pause(2)
