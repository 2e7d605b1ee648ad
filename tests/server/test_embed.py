"""The embed view, /e/{id}: the page with the snippet, framable by the sites a setting names."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

CODE = "def f(x):\n    return x * 2\n"


def test_the_embed_view_serves_the_snippet_and_may_be_framed_by_the_named_sites(
    make_client: Callable[..., tuple[TestClient, Any]],
) -> None:
    client, _ = make_client(
        frame_ancestors="'none'", embed_frame_ancestors="https://docs.example.org"
    )
    sid = client.post("/api/v1/snippets", json={"code": CODE, "args": "1.0"}).json()["id"]
    r = client.get(f"/e/{sid}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "frame-ancestors https://docs.example.org" in csp and "default-src 'self'" in csp
    tag = re.search(r'<script type="application/json" id="jaxplay-snippet">(.*?)</script>', r.text)
    assert tag is not None and json.loads(tag.group(1))["code"] == CODE
    # the playground itself keeps its own policy
    assert "frame-ancestors 'none'" in client.get(f"/s/{sid}").headers["content-security-policy"]
    missing = client.get("/e/nosuchsnippet")
    assert missing.status_code == 404
    assert "frame-ancestors https://docs.example.org" in missing.headers["content-security-policy"]


def test_by_default_only_this_site_may_frame_the_embed_view(
    make_client: Callable[..., tuple[TestClient, Any]],
) -> None:
    client, _ = make_client()
    sid = client.post("/api/v1/snippets", json={"code": CODE}).json()["id"]
    assert "frame-ancestors 'self'" in client.get(f"/e/{sid}").headers["content-security-policy"]
