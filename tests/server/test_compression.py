"""Served like a public site: text answers compressed as the client accepts (never an
event stream or the WebSocket), the page's hashed assets immutable and precompressed,
the HTML revalidated by its ETag."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import brotli
from fastapi.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

from backend.app.web.compression import Compression, negotiate

Make = Callable[..., tuple[TestClient, Any]]
CODE = "def f(x):\n    return x\n"
SCRIPT = "export const answer = () => 42;\n" * 400  # text worth compressing
IMMUTABLE = "public, max-age=31536000, immutable"


def raw(client: TestClient, path: str, **headers: str) -> tuple[Any, bytes]:
    """The answer and its body as it came over the wire (not decoded)."""
    with client.stream("GET", path, headers=headers) as r:
        return r, b"".join(r.iter_raw())


def vary(r: Any) -> set[str]:
    return {v.strip().lower() for v in r.headers.get("vary", "").split(",")}


def test_the_preferred_encoding_is_negotiated() -> None:
    assert negotiate("gzip, deflate, br, zstd") == "br"
    assert negotiate("gzip, deflate") == "gzip"
    assert negotiate("br;q=0.5, gzip") == "gzip"
    assert negotiate("br;q=0, gzip;q=0") is None
    assert negotiate("*") == "br" and negotiate("*, br;q=0") == "gzip"
    assert negotiate("identity") is None and negotiate(None) is None and negotiate("") is None


def test_json_is_compressed_as_the_client_accepts(client: TestClient) -> None:
    plain = client.get("/openapi.json", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and "accept-encoding" in vary(plain)
    r, body = raw(client, "/openapi.json", **{"Accept-Encoding": "gzip, deflate, br"})
    assert r.headers["content-encoding"] == "br" and "accept-encoding" in vary(r)
    assert brotli.decompress(body) == plain.content and len(body) < len(plain.content) / 3
    assert int(r.headers["content-length"]) == len(body)
    r, body = raw(client, "/openapi.json", **{"Accept-Encoding": "gzip"})
    assert r.headers["content-encoding"] == "gzip" and gzip.decompress(body) == plain.content
    # too small to be worth it: as it is
    r, body = raw(client, "/healthz", **{"Accept-Encoding": "br"})
    assert "content-encoding" not in r.headers and json.loads(body)["status"] == "ok"


def test_a_run_streamed_as_ndjson_is_never_compressed(client: TestClient) -> None:
    body = {"code": CODE + "# padding " + "x" * 2000 + "\n"}
    with client.stream(
        "POST",
        "/api/v1/runs",
        json=body,
        headers={"Accept": "application/x-ndjson", "Accept-Encoding": "gzip, br"},
    ) as r:
        assert r.status_code == 200 and "content-encoding" not in r.headers
        lines = b"".join(r.iter_raw()).decode().splitlines()
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds[0] == "accepted" and kinds[-1] == "done"
    # the same run answered whole, as JSON, is compressed
    whole = client.post("/api/v1/runs", json=body, headers={"Accept-Encoding": "gzip"})
    assert whole.headers["content-encoding"] == "gzip"
    assert whole.json()["events"][-1]["type"] == "done"


def test_the_websocket_is_left_alone(client: TestClient) -> None:
    with client.websocket_connect("/api/v1/ws", headers={"Accept-Encoding": "gzip, br"}) as ws:
        assert ws.receive_json()["type"] == "hello"
        ws.send_json({"type": "run", "seq": 1, "payload": {"code": CODE}})
        kinds: list[str] = []
        while not kinds or kinds[-1] != "done":
            kinds.append(ws.receive_json()["payload"]["type"])
    assert kinds[0] == "accepted"


def test_a_streamed_body_stays_a_stream_each_chunk_flushed() -> None:
    """Each chunk an app sends leaves at once, decodable up to there: nothing held back."""
    chunks = [f"line {i} ".encode() * 200 for i in range(5)]

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/plain; charset=utf-8")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for i, chunk in enumerate(chunks):
            more = i < len(chunks) - 1
            await send({"type": "http.response.body", "body": chunk, "more_body": more})

    for accept in (b"br", b"gzip"):
        sent = asyncio.run(through_compression(app, accept))
        start, bodies = sent[0], sent[1:]
        headers = dict(start["headers"])
        assert headers[b"content-encoding"] == accept and b"content-length" not in headers
        assert len(bodies) == len(chunks)
        brotli_decoder = brotli.Decompressor()
        gzip_decoder = zlib.decompressobj(31)
        for chunk, message in zip(chunks, bodies, strict=True):
            if accept == b"br":
                out = brotli_decoder.process(message["body"])
            else:
                out = gzip_decoder.decompress(message["body"])
            assert out == chunk  # all of this chunk, already
        assert bodies[-1]["more_body"] is False


async def through_compression(app: Any, accept: bytes) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    scope = {"type": "http", "method": "GET", "headers": [(b"accept-encoding", accept)]}
    await Compression(app)(scope, receive, send)
    return sent


def built(tmp_path: Path) -> Path:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text(
        "<!doctype html><html><head><title>t</title></head><body><div id=app></div>"
        + "<!-- padding -->" * 100
        + "</body></html>"
    )
    (dist / "favicon.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'></svg>")
    data = SCRIPT.encode()
    (dist / "assets" / "index-AbCd1234.js").write_bytes(data)
    (dist / "assets" / "index-AbCd1234.js.br").write_bytes(brotli.compress(data, quality=11))
    (dist / "assets" / "index-AbCd1234.js.gz").write_bytes(gzip.compress(data, 9, mtime=0))
    (dist / "assets" / "lazy-Zz9_-xYw.js").write_bytes(data)  # no variants beside it
    return dist


def test_hashed_assets_are_immutable_and_sent_precompressed(
    make_client: Make, tmp_path: Path
) -> None:
    dist = built(tmp_path)
    client, _ = make_client(frontend_dist=dist)
    asset = "/assets/index-AbCd1234.js"
    for accept, suffix in (("gzip, deflate, br", ".br"), ("gzip, deflate", ".gz")):
        r, body = raw(client, asset, **{"Accept-Encoding": accept})
        assert r.status_code == 200 and r.headers["cache-control"] == IMMUTABLE
        assert r.headers["content-type"].startswith("text/javascript")
        assert body == (dist / ("assets/index-AbCd1234.js" + suffix)).read_bytes()
        assert r.headers["content-encoding"] == ("br" if suffix == ".br" else "gzip")
        assert "accept-encoding" in vary(r)
    r, body = raw(client, asset, **{"Accept-Encoding": "identity"})
    assert "content-encoding" not in r.headers and body == SCRIPT.encode()
    assert r.headers["cache-control"] == IMMUTABLE and "accept-encoding" in vary(r)
    # without a variant beside it: compressed on the fly, still immutable
    r, body = raw(client, "/assets/lazy-Zz9_-xYw.js", **{"Accept-Encoding": "br"})
    assert r.headers["content-encoding"] == "br" and brotli.decompress(body) == SCRIPT.encode()
    assert r.headers["cache-control"] == IMMUTABLE and r.headers["etag"].startswith("W/")


def test_unhashed_files_and_pages_are_revalidated_by_etag(
    make_client: Make, tmp_path: Path
) -> None:
    client, _ = make_client(frontend_dist=built(tmp_path))
    icon = client.get("/favicon.svg")
    assert icon.status_code == 200 and icon.headers["cache-control"] == "no-cache"
    again = client.get("/favicon.svg", headers={"If-None-Match": icon.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    sid = client.post("/api/v1/snippets", json={"code": CODE}).json()["id"]
    for path in ("/", f"/s/{sid}", f"/e/{sid}"):
        r, body = raw(client, path, **{"Accept-Encoding": "gzip"})
        assert r.status_code == 200 and r.headers["cache-control"].startswith("no-cache")
        assert r.headers["content-encoding"] == "gzip" and b"<html>" in gzip.decompress(body)
        etag = r.headers["etag"]
        assert etag.startswith("W/") and "accept-encoding" in vary(r)
        repeat = client.get(path, headers={"If-None-Match": etag, "Accept-Encoding": "gzip"})
        assert repeat.status_code == 304 and repeat.content == b"", path
        assert repeat.headers["etag"] == etag
        assert "content-security-policy" in repeat.headers
        other = client.get(path, headers={"If-None-Match": 'W/"something-else"'})
        assert other.status_code == 200 and other.headers["etag"] == etag
