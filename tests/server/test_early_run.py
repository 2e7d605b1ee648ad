"""A new shared link's run, sent by the page's first script (backend/app/web/early_run.py):
the run is the page's own (the cases of frontend/test/fixtures/early-run.json, which
frontend/test/app/early.test.ts checks against the page's round trip), its JSON is
escaped, the script is the one constant the page's CSP allows by hash, first in the
``<head>``; no such script on a page without a link, with its answer, or whose run is
not known here; and a ``run`` sent before the ``hello`` arrives is served."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from backend.app.storage.base import canonical_json
from backend.app.web.early_run import BARE_TRANSFORMS, EARLY_SCRIPT, EARLY_SCRIPT_CSP, page_request
from backend.app.web.page import MAX_INITIAL_BYTES, page_html
from sandbox.protocol import RunRequest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = json.loads((ROOT / "frontend/test/fixtures/early-run.json").read_text())
Make = Callable[..., tuple[TestClient, Any]]
XSS = "</script><script>alert(1)</script><!--"
BUILT_INDEX = """<!doctype html>
<html lang="en"><head><meta charset="utf-8" /><title>jaxplay</title>
<script type="module" crossorigin src="/assets/index-0.js"></script>
<link rel="stylesheet" crossorigin href="/assets/index-0.css"></head>
<body><div id="app"></div><noscript>jaxplay needs JavaScript</noscript></body></html>
"""
EARLY_TAG = re.compile(r'<script type="application/json" id="jaxplay-early">(.*?)</script>', re.S)


def built(tmp_path: Path, adopts: bool = True) -> Path:
    """A built page whose entry adopts the early run (reads ``window.__jaxplayEarly``)."""
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text(BUILT_INDEX)
    entry = "const e = window.__jaxplayEarly;" if adopts else "const e = null;"
    (dist / "assets/index-0.js").write_text(entry)
    return dist


def stored(body: dict[str, Any]) -> str:
    return canonical_json(RunRequest.model_validate(body))


def test_the_run_sent_early_is_the_pages_own_for_every_case() -> None:
    assert sorted(BARE_TRANSFORMS) == FIXTURE["bare_transforms"]
    sent = [c for c in FIXTURE["cases"] if c["sent"] is not None]
    assert len(sent) >= 5 and len(FIXTURE["cases"]) - len(sent) >= 5
    for case in FIXTURE["cases"]:
        # the cases are links as the store keeps them
        assert json.loads(stored(case["stored"])) == case["stored"], case["name"]
        assert page_request(case["stored"]) == case["sent"], case["name"]


def test_a_new_links_page_sends_its_run_first_allowed_by_hash(
    make_client: Make, tmp_path: Path
) -> None:
    client, _ = make_client(frontend_dist=built(tmp_path))
    code = f"def f(x):\n    return x  # {XSS} \u2028\n"
    body = {"code": code, "args": "(1.0,)", "transforms": [{"name": "grad"}, {"name": "jit"}]}
    sid = client.post("/api/v1/snippets", json=body).json()["id"]
    for path in (f"/s/{sid}", f"/e/{sid}"):
        r = client.get(path)
        page, csp = r.text, r.headers["content-security-policy"]
        # the script's hash, computed from the page as a browser does, is in the CSP
        inline = re.findall(r"<script>(.*?)</script>", page, re.S)
        assert inline == [EARLY_SCRIPT]
        digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()
        assert f"'sha256-{digest}'" == EARLY_SCRIPT_CSP
        assert (
            f"script-src 'self' {EARLY_SCRIPT_CSP};" in csp
            and "unsafe-inline'" not in (csp.split("script-src", 1)[1].split(";")[0])
        )
        # first in the head, after the charset: before the module and the stylesheet
        head = page.split("</head>", 1)[0]
        at = head.index('id="jaxplay-early"')
        assert head.index("<meta charset") < at < head.index('<script type="module"')
        assert at < head.index('<link rel="stylesheet"') and at < head.index("jaxplay-snippet")
        # its JSON is inert: no text of the code ends the tag
        found = EARLY_TAG.search(page)
        assert found is not None
        assert "<" not in found.group(1) and "&" not in found.group(1)
        want = page_request(json.loads(stored(body)))
        assert want is not None and json.loads(found.group(1)) == want
        assert want["code"] == code and "timeout_s" not in want
        assert "<script>alert(1)" not in page


def test_no_early_run_without_a_link_with_its_answer_or_for_a_run_not_known_here(
    make_client: Make, tmp_path: Path
) -> None:
    dist = built(tmp_path)
    client, _ = make_client(frontend_dist=dist)
    assert "jaxplay-early" not in client.get("/").text
    assert EARLY_SCRIPT_CSP in client.get("/").headers["content-security-policy"]
    options = {
        "code": "def f(x, y):\n    return x\n",
        "transforms": [{"name": "grad", "argnums": 1}],
    }
    sid = client.post("/api/v1/snippets", json=options).json()["id"]
    page = client.get(f"/s/{sid}").text
    assert "jaxplay-snippet" in page and "jaxplay-early" not in page and "<script>" not in page
    # a page that carries its answer paints it: nothing is run for it
    snippet = stored({"code": "def f(x):\n    return x\n"})
    answer = {"snippet_id": "x", "request": json.loads(snippet), "events": [], "pending": []}
    assert "jaxplay-early" not in page_html(dist, snippet, answer)
    # ... unless the answer is too large to carry: then the link runs, at once
    big = {**answer, "events": [{"type": "jaxpr", "text": "x" * MAX_INITIAL_BYTES}]}
    assert "jaxplay-early" in page_html(dist, snippet, big)
    # the placeholder page (no build) runs over REST: no early run, its own CSP
    assert "jaxplay-early" not in page_html(tmp_path / "none", snippet)


def test_no_early_run_for_a_bundle_that_would_send_the_run_again(tmp_path: Path) -> None:
    """An entry built before the early run (it does not adopt it) sends the run itself."""
    snippet = stored({"code": "def f(x):\n    return x\n"})
    assert "jaxplay-early" in page_html(built(tmp_path / "new"), snippet)
    assert "jaxplay-early" not in page_html(built(tmp_path / "old", adopts=False), snippet)


def test_a_run_sent_before_the_hello_arrives_is_served(make_client: Make) -> None:
    client, _ = make_client()
    with client.websocket_connect("/api/v1/ws") as ws:
        body = {"code": "def f(x):\n    return x\n", "args": "(1.0,)"}
        ws.send_json({"type": "run", "seq": 1, "payload": body})
        assert ws.receive_json()["type"] == "hello"
        while (message := ws.receive_json())["payload"]["type"] != "done":
            assert message["type"] == "event" and message["seq"] == 1, message
        assert message["payload"]["status"] == "ok", message


def test_the_early_script_names_the_link_as_the_page_does() -> None:
    """Issue 33: the early run's socket names the page's link (``?link=ID``) with the
    page's own pattern (frontend/src/connection/connection.ts ``LINK_PATH``), so the server runs a
    link's code as it came in a process of its own from the first run on."""
    page = (ROOT / "frontend" / "src" / "connection" / "connection.ts").read_text()
    pattern = re.search(r"const LINK_PATH = (/.+/);", page)
    assert pattern is not None
    assert f"k={pattern.group(1)}.exec(l.pathname)" in EARLY_SCRIPT
    assert "'/api/v1/ws'+(k?'?link='+k[1]:'')" in EARLY_SCRIPT
