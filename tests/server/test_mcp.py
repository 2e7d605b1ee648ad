"""The MCP endpoint as an agent meets it: the official SDK's client over Streamable
HTTP against a live ``jaxplay serve``: the tools listed with the run request's own
schema, a real JAX run (subprocess pool), a share link that the REST API resolves, op
docs, versions; a burst over the rate limit refused with its retry-after, the per-run
limits of REST, and the Host and Origin rules."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from backend.app.core.wire import RunBody
from backend.app.web import op_docs
from tests.support.live_server import LiveServer

pytestmark = pytest.mark.slow

GRAD = {
    "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.tanh(x) ** 2)\n",
    "args": "(jnp.ones((3,)),)",
    "transforms": [{"name": "grad"}],
    "outputs": ["jaxpr", "hlo", "value"],
}


def _session(url: str, **headers: str) -> Any:
    """An MCP client session to ``url`` (the SDK's Streamable HTTP transport)."""
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0))
    return Client(streamable_http_client(url + "/mcp", http_client=http))


def call(url: str, tool: str, args: dict[str, Any], **headers: str) -> Any:
    async def go() -> Any:
        async with _session(url, **headers) as client:
            return await client.call_tool(tool, args)

    return asyncio.run(go())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A real server on the real (unjailed subprocess) pool: real JAX runs."""
    db = tmp_path_factory.mktemp("mcp") / "jaxplay.sqlite3"
    env = {
        "JAXPLAY_PROBE_ON_START": "false",
        "JAXPLAY_MCP_OUTPUT_CHARS": "300",
        "JAXPLAY_MAX_TIMEOUT_S": "30",
        "JAXPLAY_API_TOKENS": '["mcp-tenant-b-0123456789"]',
        "JAXPLAY_CACHE_JOIN_WAIT_S": "120",
    }
    live = LiveServer(db, "--pool", "subprocess", "--unsafe-no-jail", env=env).start()
    yield live
    live.stop()


def test_tools_listed_with_the_protocols_schema(server: LiveServer) -> None:
    async def go() -> Any:
        async with _session(server.url) as client:
            return await client.list_tools()

    tools = {t.name: t for t in asyncio.run(go()).tools}
    assert set(tools) == {"run", "across", "share", "op_docs", "versions"}
    # The run tool's input schema is the REST body's, made from RunRequest: one source.
    assert tools["run"].input_schema == RunBody.model_json_schema()
    assert {"code", "transforms", "outputs", "jax_version"} <= set(
        tools["run"].input_schema["properties"]
    )


def test_run_answers_outputs_capped_with_totals(server: LiveServer) -> None:
    result = call(server.url, "run", GRAD)
    assert not result.is_error, result.content
    answer = result.structured_content
    assert answer["status"] == "ok" and answer["run_id"]
    outputs = {o["type"]: o for o in answer["outputs"]}
    assert {"jaxpr", "hlo", "value"} <= set(outputs)
    # grad of sum(tanh(x)**2) at 1: 2 tanh(1) (1 - tanh(1)^2) = 0.63970
    assert outputs["value"]["text"].startswith("Array([0.6396999")
    assert "tanh" in outputs["jaxpr"]["text"]
    hlo = outputs["hlo"]
    assert hlo["chars"] > 300 and hlo["truncated"] is True and len(hlo["text"]) == 300
    assert outputs["value"]["truncated"] is False
    text = result.content[0].text
    assert text.startswith("status: ok") and "[truncated: first 300 of" in text
    # The same run over REST: the MCP answer is its events, not something else.
    rest = httpx.post(server.url + "/api/v1/runs", json=GRAD, timeout=120).json()["events"]
    rest_hlo = next(e for e in rest if e["type"] == "hlo")["text"]
    assert hlo["chars"] == len(rest_hlo) and rest_hlo.startswith(hlo["text"])


def test_share_answers_a_link_rest_resolves(server: LiveServer) -> None:
    result = call(server.url, "share", {"code": "def f():\n    return 41 + 1\n"})
    assert not result.is_error, result.content
    url = result.structured_content["url"]
    assert url.startswith(server.url + "/s/") and url in result.content[0].text
    stored = httpx.get(f"{server.url}/api/v1/snippets/{result.structured_content['id']}").json()
    assert stored["code"] == "def f():\n    return 41 + 1\n"


def test_op_docs_as_the_page_shows_them(server: LiveServer) -> None:
    result = call(server.url, "op_docs", {"name": "tanh", "kind": "jaxpr"})
    assert not result.is_error
    (doc,) = result.structured_content["docs"]
    page = json.loads(op_docs.TABLES["jaxpr"].read_text())["primitives"]["tanh"]  # the page's
    assert doc["signature"] == page["signature"] and doc["transforms"] == page["transforms"]
    assert doc["signature"].startswith("jax.lax.tanh(x") and "jvp" in doc["transforms"]
    both = call(server.url, "op_docs", {"name": "add"}).structured_content["docs"]
    assert [d["kind"] for d in both] == ["jaxpr", "stablehlo", "hlo"]
    fusion = call(server.url, "op_docs", {"name": "fusion", "kind": "hlo"})
    assert "fused" in fusion.structured_content["docs"][0]["summary"]
    missing = call(server.url, "op_docs", {"name": "no_such_op"})
    assert missing.is_error and "no docs for 'no_such_op'" in missing.content[0].text


def test_versions_lists_the_offered_jax(server: LiveServer) -> None:
    result = call(server.url, "versions", {})
    assert not result.is_error
    rest = httpx.get(server.url + "/api/v1/backends").json()
    offered = {v["version"] for b in rest["backends"] for v in b["versions"]}
    assert offered and {v["version"] for v in result.structured_content["versions"]} == offered
    assert "JAX " in result.content[0].text


def test_run_errors_are_the_rest_errors(server: LiveServer) -> None:
    bad = call(server.url, "run", {"code": "def f():\n    return 1\n", "outputs": ["nope"]})
    assert bad.is_error and bad.structured_content["status"] == 422
    assert bad.structured_content["field"].startswith("outputs")
    huge = call(server.url, "run", {"code": "x = 1\n" * 20000})
    assert huge.is_error and huge.structured_content["status"] == 413
    # A token the server did not issue names no tenant, over MCP as over REST.
    forged = call(server.url, "run", GRAD, authorization="Bearer invented-token")
    assert forged.is_error and forged.structured_content["error"] == "invalid_token"
    # across: the REST route's checks, a version this server cannot run named by its place
    across = call(server.url, "across", {"request": GRAD, "versions": ["0.4.1", "0.4.2"]})
    assert across.is_error and across.structured_content["status"] == 422
    assert across.structured_content["field"] == "versions.0"


def test_host_and_origin_rules(server: LiveServer) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
    }
    r = httpx.post(server.url + "/mcp", json=init, headers={**headers, "host": "evil.example"})
    assert r.status_code == 421
    r = httpx.post(
        server.url + "/mcp", json=init, headers={**headers, "origin": "https://evil.example"}
    )
    assert r.status_code == 403 and r.json()["error"] == "forbidden_origin"
    own = httpx.post(server.url + "/mcp", json=init, headers={**headers, "origin": server.url})
    assert own.status_code == 200, own.text


def test_a_burst_over_the_rate_limit_gets_its_retry_after(tmp_path: Path) -> None:
    """The REST rate limit, paid by the agent's address: 3 at once, then one a minute."""
    env = {
        "JAXPLAY_PROBE_ON_START": "false",
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "1",
        "JAXPLAY_RATE_LIMIT_BURST": "3",
    }
    live = LiveServer(tmp_path / "burst.sqlite3", "--pool", "tests.server.fakes:FakePool",
                      "--unsafe-no-jail", env=env).start()  # fmt: skip
    try:

        async def burst() -> list[Any]:
            async with _session(live.url) as client:
                return [
                    await client.call_tool("run", {"code": f"def f():\n    return {i}\n"})
                    for i in range(5)
                ]

        results = asyncio.run(burst())
        assert [r.is_error for r in results] == [False, False, False, True, True]
        refused = results[3].structured_content
        assert refused["status"] == 429 and refused["error"] == "rate_limited"
        assert 0 < refused["retry_after_s"] <= 60
        assert "retry after" in results[3].content[0].text
        # REST from the same address is refused too: one bucket, whichever door.
        r = httpx.post(live.url + "/api/v1/runs", json={"code": "def f():\n    return 9\n"})
        assert r.status_code == 429 and "retry-after" in r.headers
    finally:
        live.stop()


def test_jaxplay_mcp_proxies_stdio_to_the_server(server: LiveServer) -> None:
    """``jaxplay mcp``, as a local client (Claude Desktop, an editor) starts it: the SDK's
    stdio client talks to it, and it answers with the server's tools and runs."""
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("jaxplay")),  # as installed by make setup
        args=["mcp", "--server", server.url],
        cwd=str(Path(__file__).resolve().parents[2]),
    )

    async def go() -> tuple[Any, Any]:
        async with Client(stdio_client(params)) as client:
            tools = await client.list_tools()
            return tools, await client.call_tool("run", {"code": "def f():\n    return 6 * 7\n"})

    tools, result = asyncio.run(go())
    assert {t.name for t in tools.tools} == {"run", "across", "share", "op_docs", "versions"}
    assert not result.is_error, result.content
    (value,) = [o for o in result.structured_content["outputs"] if o["type"] == "value"]
    assert value["text"] == "42"


def test_an_agent_cannot_hand_another_its_answer(server: LiveServer) -> None:
    """One person's agent runs code whose answer changes with every run; another
    person's agent asks for the same request. Through MCP as through REST, the second is
    never served the first's unconfirmed answer: it waits for the pristine run, which
    disagrees, and then runs on its own."""
    request = {
        "code": "import time\n\nSEED = time.time_ns()\n\ndef f():\n    return SEED\n",
        "outputs": ["value"],
    }
    first = call(server.url, "run", request)  # the address's tenant
    second = call(server.url, "run", request, authorization="Bearer mcp-tenant-b-0123456789")
    assert not first.is_error and not second.is_error, (first.content, second.content)
    assert second.structured_content["cached"] is False

    def value(result: Any) -> str:
        (out,) = [o for o in result.structured_content["outputs"] if o["type"] == "value"]
        return str(out["text"])

    assert value(first) != value(second)


def test_an_agent_that_hangs_up_ends_its_run(server: LiveServer) -> None:
    """An agent that stops waiting holds no place: its run ends within seconds, not at
    its 25 s sleep's end (as a REST run ends when its client leaves)."""

    def ended_early() -> float:
        text = httpx.get(server.url + "/metrics").text
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("jaxplay_runs_total{")
            and ('status="cancelled"' in line or 'status="abandoned"' in line)
        )

    before = ended_early()
    request = {
        "code": "import time\ntime.sleep(25)\n\ndef f():\n    return 1\n",
        "outputs": ["value"],
    }

    async def hang_up() -> None:
        http = httpx2.AsyncClient(timeout=httpx2.Timeout(3.0))
        async with Client(streamable_http_client(server.url + "/mcp", http_client=http)) as c:
            await c.call_tool("run", request)

    left = time.monotonic()
    with pytest.raises(ExceptionGroup) as raised:  # the SDK's task group carries it
        asyncio.run(hang_up())
    assert raised.group_contains(httpx2.ReadTimeout)  # the client's own 3 s, nothing else
    while ended_early() == before and time.monotonic() - left < 15:
        time.sleep(0.25)
    assert ended_early() == before + 1, "the run went on after its agent hung up"
    assert time.monotonic() - left < 15


def _counted(metrics: str, route: str) -> float:
    """The sum of jaxplay_http_requests_total over every method and status of ``route``."""
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith("jaxplay_http_requests_total{") and f'route="{route}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_tool_call_is_one_http_request_in_the_metrics(server: LiveServer) -> None:
    """The tool's in-process call to the REST route is the agent's one request, counted
    once (as POST /mcp), not a second time under the route it reached."""
    before = httpx.get(server.url + "/metrics").text
    result = call(server.url, "versions", {})
    assert not result.is_error, result.content
    after = httpx.get(server.url + "/metrics").text
    assert _counted(after, "/mcp") > _counted(before, "/mcp")
    assert _counted(after, "/api/v1/backends") == _counted(before, "/api/v1/backends")
    # and a REST call of that route is counted, so the comparison above can fail
    httpx.get(server.url + "/api/v1/backends").raise_for_status()
    again = httpx.get(server.url + "/metrics").text
    assert _counted(again, "/api/v1/backends") == _counted(after, "/api/v1/backends") + 1


#: In a process of its own (its sys.modules is the test's evidence): the server is made
#: and started without the SDK; the endpoint's first requests, two at once, import it
#: and start one session manager; the lifespan's end stops it.
_LAZY_SDK = """
import asyncio, sys
from pathlib import Path
import httpx
from tests.server.conftest import make_settings
from tests.server.fakes import FakePool
from backend.app import create_app
from backend.app.outside.mcp import endpoint as mcp_endpoint

app = create_app(make_settings(Path(sys.argv[1])), pool=FakePool(), pool_name="fake")
started = []
original = mcp_endpoint.McpEndpoint._start_manager
async def counted(self):
    started.append(1)
    await original(self)
mcp_endpoint.McpEndpoint._start_manager = counted
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
HEADERS = {"accept": "application/json, text/event-stream"}

async def main():
    async with app.router.lifespan_context(app):
        assert "mcp.server.lowlevel" not in sys.modules, "imported with the server"
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            assert (await c.get("/healthz")).status_code == 200
            assert "mcp.server.lowlevel" not in sys.modules, "imported by another route"
            answers = await asyncio.gather(
                *(c.post("/mcp", json=LIST, headers=HEADERS) for _ in range(2))
            )
        for r in answers:
            assert r.status_code == 200, r.text
            assert {t["name"] for t in r.json()["result"]["tools"]} >= {"run", "share"}
        assert "mcp.server.lowlevel" in sys.modules and started == [1], started
        endpoint = next(r.app.app.__self__ for r in app.router.routes if r.path == "/mcp")
        assert endpoint._holder is not None and not endpoint._holder.done()
        holder = endpoint._holder
    assert holder.done() and endpoint._manager is None, "the manager outlived the lifespan"
    print("lazy ok")

asyncio.run(main())
"""


def test_the_sdk_is_imported_on_the_endpoint_s_first_request(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LAZY_SDK, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0 and "lazy ok" in done.stdout, done.stdout + done.stderr
