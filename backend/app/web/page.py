"""The page: the built frontend when there is one, else a small placeholder.

``/s/{id}`` is the same page with the snippet's request embedded as
``<script type="application/json" id="jaxplay-snippet">``, so a shared link shows
its code without another round trip (the page may also fetch
``/api/v1/snippets/{id}``). When the result cache holds a confirmed answer for that
request, the page also carries it, ``<script type="application/json"
id="jaxplay-initial">`` (``initial_tag``), so the results paint before a WebSocket
opens; and a server-rendered rendition of the code and its jaxpr (``static_block``,
``<article id="jaxplay-static">`` in the page's body, visible at the first paint and
readable with scripts off; the page's script removes it in the task that builds the
page, so no frame shows neither). Everything embedded is escaped: JSON with ``<``, ``>``
and ``&`` as ``\\u003c`` ``\\u003e`` ``\\u0026`` (no text can end the tag), HTML
through ``html.escape``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
import re
from pathlib import Path
from typing import Any

from backend.app.web.early_run import EARLY_SCRIPT_CSP, early_tags
from backend.app.web.middleware import content_security_policy

PLACEHOLDER = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>jaxplay</title>
<style>
 body{font:14px/1.4 system-ui,sans-serif;margin:0;display:grid;grid-template-columns:1fr 1fr;height:100vh}
 section{padding:12px;overflow:auto} textarea,input{width:100%;box-sizing:border-box;font:13px monospace}
 textarea{height:45vh} pre{white-space:pre-wrap;font:12px monospace;background:#f6f6f6;padding:8px}
 h1{font-size:16px;margin:0 0 8px} .note{color:#666}
</style></head><body>
<section>
<h1>jaxplay <span class="note">(placeholder page: the full page comes with the frontend build)</span></h1>
<label>code<textarea id="code">import jax.numpy as jnp

def f(x):
    return jnp.sum(jnp.tanh(x) ** 2)
</textarea></label>
<label>args <input id="args" value="(jnp.ones((3,)),)"></label>
<label>transforms (JSON) <input id="transforms" value='[{"name": "grad"}, {"name": "jit"}]'></label>
<p><button id="run">Run (Ctrl+Enter)</button> <button id="share">Share</button> <span id="link"></span></p>
<p class="note">API: <a href="/docs">/docs</a> · <a href="/api/v1/backends">/api/v1/backends</a></p>
</section>
<section><pre id="out">Events appear here.</pre></section>
__SNIPPET__
<script>
const $ = (id) => document.getElementById(id);
const snippet = document.getElementById("jaxplay-snippet");
let base = {};
if (snippet) {
  base = JSON.parse(snippet.textContent);
  $("code").value = base.code; $("args").value = base.args;
  $("transforms").value = JSON.stringify(base.transforms);
}
function request() {
  return Object.assign({}, base, {code: $("code").value, args: $("args").value,
                       transforms: JSON.parse($("transforms").value || "[]")});
}
function show(ev) {
  const out = $("out");
  if (ev.text !== undefined) out.textContent += `\\n── ${ev.type} ──\\n${ev.text}`;
  else out.textContent += "\\n" + JSON.stringify(ev);
}
async function run() {
  $("out").textContent = "";
  const r = await fetch("/api/v1/runs", {method: "POST",
    headers: {"Content-Type": "application/json", "Accept": "application/x-ndjson"},
    body: JSON.stringify(request())});
  if (!r.ok) { $("out").textContent = JSON.stringify(await r.json(), null, 1); return; }
  const reader = r.body.getReader(); const dec = new TextDecoder(); let buf = "";
  for (;;) {
    const {value, done} = await reader.read(); if (done) break;
    buf += dec.decode(value, {stream: true}); let i;
    while ((i = buf.indexOf("\\n")) >= 0) { show(JSON.parse(buf.slice(0, i))); buf = buf.slice(i + 1); }
  }
}
async function share() {
  const r = await fetch("/api/v1/snippets", {method: "POST",
    headers: {"Content-Type": "application/json"}, body: JSON.stringify(request())});
  const body = await r.json();
  $("link").innerHTML = r.ok ? `<a href="${body.url}">${body.url}</a>` : body.message;
}
$("run").onclick = run; $("share").onclick = share;
document.addEventListener("keydown", (e) => { if ((e.ctrlKey || e.metaKey) && e.key === "Enter") run(); });
</script></body></html>
"""


def _inline_hash(tag: str) -> str:
    """The CSP source that allows the placeholder's one inline ``<tag>`` (its hash)."""
    found = re.search(rf"<{tag}>(.*?)</{tag}>", PLACEHOLDER, re.S)
    assert found is not None, tag
    digest = hashlib.sha256(found.group(1).encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def page_csp(dist: Path, frame_ancestors: str) -> str:
    """The built page loads only its own scripts and, by its hash, the one constant
    inline script that sends a new link's run (backend/app/web/early_run.py); the
    placeholder's one inline script is allowed by its hash, no other."""
    if (dist / "index.html").is_file():
        return content_security_policy(frame_ancestors, script=EARLY_SCRIPT_CSP)
    return content_security_policy(frame_ancestors, script=_inline_hash("script"))


#: the largest answer a page carries (its JSON, in bytes); a larger one comes over the
#: WebSocket as before, and the page stays small
MAX_INITIAL_BYTES = 1 << 20


def _script_json(value: Any, *, ascii_only: bool = False) -> str:
    """JSON for an inert ``<script type="application/json">``: ``<``, ``>`` and ``&``
    escaped, so no string in it can end the tag or open a comment."""
    data = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))
    return data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def snippet_tag(request_json: str) -> str:
    """The snippet as an inert JSON script tag; ``<`` escaped so it cannot end the tag."""
    data = _script_json(json.loads(request_json))
    return f'<script type="application/json" id="jaxplay-snippet">{data}</script>'


def initial_tag(initial: dict[str, Any]) -> str:
    """The answer a page opens with (``{"snippet_id", "request", "events", "pending"}``,
    docs/api.md) as an inert JSON script tag; "" when its JSON is over
    ``MAX_INITIAL_BYTES``. ASCII only: a run's output may hold any code point."""
    data = _script_json(initial, ascii_only=True)
    if len(data) > MAX_INITIAL_BYTES:
        return ""
    return f'<script type="application/json" id="jaxplay-initial">{data}</script>'


def _text(value: object) -> str:
    """Text for HTML: escaped, and encodable (a lone surrogate becomes U+FFFD)."""
    text = str(value).encode("utf-8", "replace").decode("utf-8", "replace")
    return html.escape(text)


#: the rendition's element; the page's script removes it once it has built the page
STATIC_ID = "jaxplay-static"

#: the rendition's style, in the page's head: painted with the HTML, whatever the
#: bundle's stylesheet says; hidden once the page's root holds the page (the script
#: also removes it), so a bundle that predates it never shows both
STATIC_STYLE = (
    "<style>"
    "#jaxplay-static{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);"
    "height:100vh;box-sizing:border-box;font:14px/1.4 system-ui,sans-serif}"
    "#jaxplay-static>section{overflow:auto;padding:8px 12px;min-width:0}"
    "#jaxplay-static .static-out{border-left:1px solid var(--border,#d3d8e0)}"
    "#jaxplay-static h2{font-size:12px;font-weight:600;margin:4px 0 6px;opacity:.7}"
    "#jaxplay-static pre{font:13px/1.45 var(--mono,ui-monospace,monospace);margin:0 0 12px;"
    "white-space:pre;overflow-x:auto}"
    "#jaxplay-static p{font-size:12px;opacity:.7}"
    "@media (max-width:900px){#jaxplay-static{grid-template-columns:minmax(0,1fr);height:auto}"
    "#jaxplay-static .static-out{border-left:0;border-top:1px solid var(--border,#d3d8e0)}}"
    "body:has(#app>*) #jaxplay-static{display:none}"
    "</style>"
)


def static_block(request: dict[str, Any], events: list[dict[str, Any]] | None) -> str:
    """The snippet as the server renders it, shown until the page's script has built
    the page (and the whole time without scripts): its code, arguments and transforms,
    and, when the page carries a confirmed answer, the main pipeline's jaxpr and value.
    The jaxpr's ``<pre>`` has ``elementtiming="jaxpr"`` (the benchmark reads when it
    was painted)."""
    transforms = " → ".join(str(t.get("name", "?")) for t in request.get("transforms", []))
    code = [
        '<section class="static-code"><h2>Code</h2>',
        f'<pre data-testid="static-code">{_text(request.get("code", ""))}</pre>',
        f"<p>entry <code>{_text(request.get('entry', 'f'))}</code>, args "
        f"<code>{_text(request.get('args', '()'))}</code>"
        + (f", transforms <code>{_text(transforms)}</code>" if transforms else "")
        + "</p></section>",
    ]
    out: list[str] = []
    main = [e for e in events or [] if e.get("pipeline", "main") == "main"]
    for kind, field, title in (("jaxpr", "text", "jaxpr"), ("value", "repr", "Value")):
        found = next((e for e in main if e.get("type") == kind), None)
        if found is not None:
            out.append(
                f'<h2>{title}</h2><pre data-testid="static-{kind}" elementtiming="{kind}">'
                f"{_text(found.get(field, ''))}</pre>"
            )
    if events:
        made = events[0].get("cached_at", "")
        out.append(
            f"<p>From the server's cache (made {_text(made)}); timings are measured by a run.</p>"
        )
    outputs = '<section class="static-out">' + "".join(out) + "</section>" if out else ""
    return f'<article id="{STATIC_ID}">' + "".join(code) + outputs + "</article>"


#: the built page's entry module, as index.html names it
_ENTRY = re.compile(r'<script\s+type="module"[^>]*\ssrc="/([^"]+)"')


@functools.lru_cache(maxsize=8)
def _entry_has(path: str, mtime_ns: int, marker: str) -> bool:
    return marker in Path(path).read_text(errors="replace")


def entry_adopts_early(dist: Path, index_html: str) -> bool:
    """Whether the built page's entry (named by ``index_html``, dist's index.html)
    adopts the early run (it reads ``window.__jaxplayEarly``, frontend/src/connection/socket.ts):
    an older bundle would send the run again on a socket of its own, so its pages get
    no early run."""
    found = _ENTRY.search(index_html)
    if found is None:
        return False
    try:
        entry = (dist / found.group(1)).resolve()
        if not entry.is_relative_to(dist.resolve()) or not entry.is_file():
            return False
        return _entry_has(str(entry), entry.stat().st_mtime_ns, "__jaxplayEarly")
    except OSError:
        return False


#: where the early run's tags go: after the charset (else the ``<head>`` tag)
_CHARSET = re.compile(r"<meta\s+charset[^>]*>", re.I)
_HEAD = re.compile(r"<head(\s[^>]*)?>", re.I)


def page_html(
    dist: Path,
    snippet_json: str | None = None,
    initial: dict[str, Any] | None = None,
) -> str:
    """The page; with ``snippet_json``, the snippet embedded (and its server-rendered
    rendition, ``static_block``); with ``initial``, the answer it opens with (``initial_tag``).
    A built page of a link that carries no answer opens with the script that sends its
    run (``early_tags``), first in its ``<head>``: no stylesheet or module waits before it."""
    index = dist / "index.html"
    text = index.read_text() if index.is_file() else None
    head = body = first = ""
    if snippet_json is not None:
        head = snippet_tag(snippet_json)
        carried = initial_tag(initial) if initial is not None else ""
        head += carried
        events = initial["events"] if initial is not None and carried else None
        stored = json.loads(snippet_json)
        body = static_block(stored, events)
        adopts = not carried and text is not None and entry_adopts_early(dist, text)
        first = early_tags(stored, _script_json) if adopts else ""
    if text is not None:
        head += STATIC_STYLE if body else ""
        if first:  # after the charset, before anything that loads
            found = _CHARSET.search(text) or _HEAD.search(text)
            at = found.end() if found else 0
            text = text[:at] + first + text[at:]
        if head:
            text = (
                text.replace("</head>", head + "</head>", 1) if "</head>" in text else head + text
            )
        if body:  # before the page's root, so it is the first thing painted
            app = '<div id="app">'
            if app in text:
                text = text.replace(app, body + app, 1)
            elif "</body>" in text:
                text = text.replace("</body>", body + "</body>", 1)
            else:
                text += body
        return text
    # the placeholder shows the code in its own fields: the rendition is for no scripts
    return PLACEHOLDER.replace(
        "__SNIPPET__", head + (f"<noscript>{body}</noscript>" if body else "")
    )


def not_found_html(snippet_id: str) -> str:
    return (
        "<!doctype html><meta charset=utf-8><title>jaxplay: no such snippet</title>"
        f'<p>No snippet <code>{html.escape(snippet_id)}</code>. <a href="/">Start a new one</a>.</p>'
    )


def tour_not_found_html(step: str) -> str:
    return (
        "<!doctype html><meta charset=utf-8><title>jaxplay: no such tour step</title>"
        f'<p>No tour step <code>{html.escape(step)}</code>. <a href="/tour">Start the tour</a>.</p>'
    )


def busy_html(message: str) -> str:
    return (
        "<!doctype html><meta charset=utf-8><title>jaxplay: slow down</title>"
        f'<p>{html.escape(message)}. <a href="/">Start a new snippet</a>.</p>'
    )
