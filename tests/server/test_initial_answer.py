"""A shared link that opens with its results: the page of ``/s/{id}`` and ``/e/{id}``
carries the confirmed answer the result cache would serve this reader
(``<script type="application/json" id="jaxplay-initial">``), escaped, and a
rendition of the code and its jaxpr in the HTML (``<article id="jaxplay-static">``:
visible at the first paint in the built page, in ``<noscript>`` on the placeholder
page); never a candidate's or an unstable key's, and nothing runs to make the page."""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from backend.app.web.page import MAX_INITIAL_BYTES
from sandbox.pool.fake import FakePool as _FakePool
from sandbox.pool.fake import FakeRun
from sandbox.protocol import RunRequest

from .fakes import FakePool

Make = Callable[..., tuple[TestClient, Any]]
CODE = "def f(x):\n    return x * 2\n"
NO_TIMING = ["jaxpr", "stablehlo", "hlo", "value", "cost"]
TOKENS = ["alice-token-0123456789", "bob-token-0123456789", "carol-token-0123456789"]
ALICE, BOB, CAROL = ({"Authorization": f"Bearer {t}"} for t in TOKENS)
#: what differs between two replays of one answer: the run's id, the age, the clock
PER_REPLAY = {"run_id", "age_s", "ms"}
XSS = "</script><script>alert(1)</script><!--"


def initial(page: str) -> dict[str, Any] | None:
    found = re.search(r'<script type="application/json" id="jaxplay-initial">(.*?)</script>', page)
    return None if found is None else json.loads(found.group(1))


def noscript(page: str) -> str:
    found = re.search(
        r"<noscript><article id=\"jaxplay-static\">(.*?)</article></noscript>", page, re.S
    )
    assert found is not None, page
    return found.group(1)


def run(client: TestClient, body: dict[str, Any], who: dict[str, str]) -> list[dict[str, Any]]:
    r = client.post("/api/v1/runs", json=body, headers=who)
    assert r.status_code == 200, r.text
    events: list[dict[str, Any]] = r.json()["events"]
    return events


def cache_state(client: TestClient, body: dict[str, Any]) -> str:
    services = client.app.state.services  # type: ignore[attr-defined]
    request = services.runs.prepare(RunRequest.model_validate(body))
    assert client.portal is not None
    state, _ = client.portal.call(services.cache.lookup, request, "")
    return str(state)


def until_state(client: TestClient, body: dict[str, Any], want: str, within_s: float = 30) -> None:
    """Waits for the cache's verdict on ``body`` (a confirming run may be the server's
    own, made in the background)."""
    deadline = time.monotonic() + within_s
    while (state := cache_state(client, body)) != want:
        assert time.monotonic() < deadline, f"the cache says {state!r}, not {want!r}"
        time.sleep(0.05)


def confirm(client: TestClient, body: dict[str, Any]) -> None:
    """Two tenants run ``body``; whatever the cache takes to confirm, it is confirmed."""
    run(client, body, ALICE)
    run(client, body, BOB)
    until_state(client, body, "hit")


def websocket_replay(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The events a run of ``body`` over the WebSocket shows Carol, up to its done."""
    with client.websocket_connect(f"/api/v1/ws?token={TOKENS[2]}") as ws:
        assert ws.receive_json()["type"] == "hello"
        ws.send_json({"type": "run", "seq": 1, "payload": body})
        events = []
        while True:
            message = ws.receive_json()
            assert message["type"] == "event", message
            events.append(message["payload"])
            if message["payload"]["type"] == "done":
                return events


def comparable(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k not in PER_REPLAY} for e in events]


def test_a_confirmed_answer_comes_with_the_page_as_the_websocket_would_replay_it(
    make_client: Make,
) -> None:
    client, pool = make_client(api_tokens=TOKENS, pristine_concurrency=1)
    body = {"code": CODE, "args": "1.0", "outputs": NO_TIMING}
    sid = client.post("/api/v1/snippets", json=body).json()["id"]
    confirm(client, body)
    runs_before = pool.total
    for path in (f"/s/{sid}", f"/e/{sid}"):
        page = client.get(path)
        assert page.status_code == 200
        carried = initial(page.text)
        assert carried is not None, path
        assert carried["snippet_id"] == sid and carried["pending"] == []
        assert carried["request"] == client.get(f"/api/v1/snippets/{sid}").json()
        events = carried["events"]
        assert events[0]["type"] == "accepted" and events[0]["cached"] is True
        assert events[-1] == {**events[-1], "type": "done", "status": "ok", "cached": True}
        assert comparable(events) == comparable(websocket_replay(client, body))
        # readable without scripts: the code and the jaxpr, as text
        static = noscript(page.text)
        jaxpr = next(e["text"] for e in events if e["type"] == "jaxpr")
        assert html.escape(CODE) in static and html.escape(jaxpr) in static
    assert pool.total == runs_before  # the pages ran nothing


def test_a_page_asking_for_timings_says_a_run_brings_them(make_client: Make) -> None:
    client, _ = make_client(api_tokens=TOKENS, pristine_concurrency=1)
    body = {"code": CODE}  # the default outputs: timing among them
    sid = client.post("/api/v1/snippets", json=body).json()["id"]
    confirm(client, body)
    carried = initial(client.get(f"/s/{sid}").text)
    assert carried is not None and carried["pending"] == ["timing"]
    assert not any(e["type"] in ("timing", "stage") for e in carried["events"])
    ws = websocket_replay(client, body)
    shown = [e for e in ws if e["type"] not in ("timing", "stage")]
    assert comparable(carried["events"][:-1]) == comparable(shown[:-1])


def test_a_candidate_is_never_carried_not_even_to_the_tenant_that_made_it(
    make_client: Make,
) -> None:
    client, pool = make_client(api_tokens=TOKENS, pristine_concurrency=0)
    body = {"code": CODE, "outputs": NO_TIMING}
    sid = client.post("/api/v1/snippets", json=body).json()["id"]
    run(client, body, ALICE)
    assert cache_state(client, body) == "candidate"
    for who in ({}, ALICE, BOB):
        page = client.get(f"/s/{sid}", headers=who)
        assert page.status_code == 200 and initial(page.text) is None
        static = noscript(page.text)
        assert html.escape(CODE) in static and "jaxpr" not in static
    assert pool.total == 1  # a page asks the cache, never the pool


def test_an_unstable_answer_is_never_carried(make_client: Make) -> None:
    client, _ = make_client(api_tokens=TOKENS, pristine_concurrency=1)
    body = {"code": CODE + "# fake: random\n", "outputs": NO_TIMING}
    sid = client.post("/api/v1/snippets", json=body).json()["id"]
    run(client, body, ALICE)
    run(client, body, BOB)
    until_state(client, body, "unstable")
    assert initial(client.get(f"/s/{sid}").text) is None


def hostile_script(run: FakeRun) -> list[dict[str, Any]]:
    """A run whose outputs hold markup, as real ones do (``pjit[name=<lambda>]``)."""
    return [
        {"type": "stdout", "text": f"printed {XSS} & more\n", "stage": "exec"},
        {
            "type": "jaxpr",
            "text": "{ lambda ; a:f32[]. let b:f32[] = pjit[name=<lambda> jaxpr={ lambda ; "
            f"c:f32[]. let  in (c,) }}] a in (b,) }} {XSS}",
            "sources": [],
        },
        {"type": "value", "repr": f"Array(2., dtype=float32) {XSS}", "tree": []},
    ]


def test_markup_in_the_code_and_the_outputs_is_escaped(make_client: Make) -> None:
    client, _ = make_client(
        pool=_FakePool(4, script=hostile_script), api_tokens=TOKENS, pristine_concurrency=1
    )
    code = f"def f(x):\n    return x  # {XSS}\n"
    body = {"code": code, "outputs": NO_TIMING}
    sid = client.post("/api/v1/snippets", json=body).json()["id"]
    confirm(client, body)
    page = client.get(f"/s/{sid}").text
    assert "<script>alert(1)" not in page and "<!--" not in page
    assert page.count("</script>") == len(re.findall(r"<script[ >]", page))
    carried = initial(page)
    assert carried is not None
    assert carried["request"]["code"] == code
    jaxpr = next(e["text"] for e in carried["events"] if e["type"] == "jaxpr")
    assert jaxpr.endswith(XSS) and "<lambda>" in jaxpr  # the exact text, once parsed
    static = noscript(page)
    assert "pjit[name=&lt;lambda&gt;" in static and html.escape(XSS) in static
    assert html.escape(code) in static


#: the shape of the built page (frontend/index.html as Vite writes it)
BUILT_INDEX = """<!doctype html>
<html lang="en"><head><meta charset="utf-8" /><title>jaxplay</title>
<script type="module" crossorigin src="/assets/index-0.js"></script></head>
<body><div id="app"></div><noscript>jaxplay needs JavaScript</noscript></body></html>
"""


def test_the_built_page_shows_the_escaped_code_and_jaxpr_before_any_script(
    make_client: Make, tmp_path: Path
) -> None:
    """The first paint of a confirmed link holds its code and jaxpr: server-rendered
    text in the body, outside ``<noscript>``, ahead of the page's root."""
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text(BUILT_INDEX)
    client, _ = make_client(
        pool=_FakePool(4, script=hostile_script),
        api_tokens=TOKENS,
        pristine_concurrency=1,
        frontend_dist=dist,
    )
    code = f"def f(x):\n    return x  # {XSS}\n"
    body = {"code": code, "outputs": NO_TIMING}
    sid = client.post("/api/v1/snippets", json=body).json()["id"]
    confirm(client, body)
    page = client.get(f"/s/{sid}").text
    found = re.search(
        r'<body><article id="jaxplay-static">(.*?)</article><div id="app">', page, re.S
    )
    assert found is not None, page
    shown = found.group(1)
    assert "<noscript" not in shown and "<script" not in shown
    carried = initial(page)
    assert carried is not None
    jaxpr = next(e["text"] for e in carried["events"] if e["type"] == "jaxpr")
    code_pre = re.search(r'<pre data-testid="static-code">(.*?)</pre>', shown, re.S)
    jaxpr_pre = re.search(
        r'<pre data-testid="static-jaxpr" elementtiming="jaxpr">(.*?)</pre>', shown, re.S
    )
    assert code_pre is not None and html.unescape(code_pre.group(1)) == code
    assert jaxpr_pre is not None and html.unescape(jaxpr_pre.group(1)) == jaxpr
    assert html.escape(XSS) in jaxpr_pre.group(1) and "<script>alert(1)" not in page
    # a link with no confirmed answer: its code all the same, no outputs
    other = client.post("/api/v1/snippets", json={"code": CODE, "outputs": ["jaxpr"]}).json()["id"]
    page = client.get(f"/s/{other}").text
    assert initial(page) is None
    assert f'<pre data-testid="static-code">{html.escape(CODE)}</pre>' in page
    assert "static-jaxpr" not in page


def test_an_answer_over_the_size_limit_is_left_to_the_websocket(make_client: Make) -> None:
    big = "x" * (MAX_INITIAL_BYTES + 1)

    def script(run: FakeRun) -> list[dict[str, Any]]:
        return [{"type": "jaxpr", "text": big, "sources": []}]

    client, _ = make_client(
        pool=_FakePool(4, script=script), api_tokens=TOKENS, pristine_concurrency=1
    )
    body = {"code": CODE, "outputs": NO_TIMING}
    sid = client.post("/api/v1/snippets", json=body).json()["id"]
    confirm(client, body)
    page = client.get(f"/s/{sid}").text
    assert initial(page) is None and html.escape(CODE) in noscript(page)


def test_the_page_without_a_snippet_carries_nothing(make_client: Make) -> None:
    client, _ = make_client(pool=FakePool())
    page = client.get("/").text
    assert initial(page) is None and "jaxplay-static" not in page
