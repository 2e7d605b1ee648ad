"""A new shared link's run, sent by the page's first script (issue 27).

A shared link (``/s/{id}``, ``/e/{id}``) whose page carries no answer runs at once. The
page's entry module (frontend/src/boot.ts) is ~100 kB and runs only once fetched and
parsed; the run would leave then. Instead the page's ``<head>`` holds, before the
stylesheet and the module, the run the page will send (``early_tags``: an inert JSON
tag) and one small constant classic script (``EARLY_SCRIPT``, allowed by its hash in
the page's CSP, ``EARLY_SCRIPT_CSP``) that opens the page's WebSocket at once, sends
that run with ``seq`` 1 as soon as the socket is open (the server reads it after its
``hello``), and keeps every message that comes back in ``window.__jaxplayEarly``. The
page's connection adopts that socket (frontend/src/connection/connection.ts ``adopt``): its
messages replayed, the run adopted by the page's first run when the requests are the
same (connection/socket.ts).

The request sent must be exactly the one the page sends for the link, else the page
drops it and sends its own (two runs for one visit). The page sends
``toRequest(fromRequest(stored))`` (frontend/src/model/state.ts), not the stored request
itself (the store keeps every default: ``timeout_s``, ``outputs``...). ``page_request``
is that round trip for the requests whose round trip is plain (bare transforms, no
opt-in outputs, flags, mesh, checks, targets or libraries), None for the rest: their
page sends the run itself, from its entry module, as before. The cases in
frontend/test/fixtures/early-run.json hold both sides to it: tests/server/
test_early_run.py checks ``page_request`` against them, frontend/test/app/
early.test.ts the page's round trip.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from typing import Any, get_args

from sandbox.protocol import RunRequest, TransformName

#: transforms whose bare step (``{"name": n}``, no options) the page sends back as it
#: came, without a problem: every transform the protocol names (the fixture's list,
#: which frontend/test/app/early.test.ts checks the page against, must name them all:
#: tests/server/test_early_run.py)
BARE_TRANSFORMS: frozenset[str] = frozenset(get_args(TransformName))

#: the fields the page reads and sends as they are (``page_request``)
_PAGE_FIELDS = frozenset(
    {"code", "entry", "args", "transforms", "compare", "backend", "devices", "config"}
)
#: fields the page never sends: whatever the link holds, its run has the default
_IGNORED = frozenset({"cache"})


@cache
def _defaults() -> dict[str, Any]:
    return RunRequest.model_validate({"code": ""}).model_dump(mode="json")


def _edged(text: object) -> bool:
    """Empty, or starting or ending with what JavaScript's or Python's trim removes."""
    if not isinstance(text, str) or not text:
        return True
    return any(c.isspace() or c in "\ufeff\u200b" for c in (text[0], text[-1]))


def _bare(steps: object) -> list[dict[str, str]] | None:
    if not isinstance(steps, list):
        return None
    out: list[dict[str, str]] = []
    for step in steps:
        if not isinstance(step, dict) or set(step) != {"name"}:
            return None
        if step["name"] not in BARE_TRANSFORMS:
            return None
        out.append({"name": step["name"]})
    return out


def page_request(stored: dict[str, Any]) -> dict[str, Any] | None:
    """The run request the page sends for the link that stores ``stored``, or None
    when its round trip is not one this function knows (the page sends it then)."""
    defaults = _defaults()
    for key, value in stored.items():
        if key in _PAGE_FIELDS or key in _IGNORED or key in ("jax_version", "timeout_s"):
            continue
        if key not in defaults or value != defaults[key]:
            return None
    code, entry, args = stored.get("code"), stored.get("entry", "f"), stored.get("args", "()")
    if not isinstance(code, str) or _edged(entry) or _edged(args):
        return None
    transforms = _bare(stored.get("transforms", []))
    compare_in = stored.get("compare", [])
    if transforms is None or not isinstance(compare_in, list) or len(compare_in) > 1:
        return None
    compare = [_bare(steps) for steps in compare_in]
    backend, devices = stored.get("backend", "auto"), stored.get("devices", 1)
    config = stored.get("config", {})
    if any(c is None for c in compare) or not isinstance(config, dict):
        return None
    if backend not in ("cpu", "gpu", "tpu", "auto"):
        return None
    if type(devices) is not int or not 1 <= devices <= 64:
        return None
    request: dict[str, Any] = {
        "code": code,
        "entry": entry,
        "args": args,
        "transforms": transforms,
        "compare": compare,
        "backend": backend,
        "devices": devices,
        # the page keeps the switches and strings it shows, no numbers
        "config": {k: v for k, v in config.items() if type(v) in (bool, str)},
    }
    version = stored.get("jax_version")
    if isinstance(version, str) and version:
        request["jax_version"] = version
    # the page keeps a link's limit only when it is longer than the request's default
    # (frontend/src/model/state.ts DEFAULT_TIMEOUT_S), within the request's bounds: the limit
    # the link was shared with after a run out of time
    timeout = stored.get("timeout_s")
    if _longer_timeout(timeout, defaults["timeout_s"]):
        request["timeout_s"] = timeout
    return request


def _longer_timeout(value: object, default: float) -> bool:
    """Whether ``value`` is a limit the page keeps: a number over the default, within
    the request's bound."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return default < value <= _max_timeout_s()


@cache
def _max_timeout_s() -> float:
    """The request's bound on ``timeout_s`` (its ``le``)."""
    field = RunRequest.model_fields["timeout_s"]
    return next(float(m.le) for m in field.metadata if getattr(m, "le", None) is not None)


#: the page's first script: opens the WebSocket (the URL of frontend/src/connection/connection.ts
#: wsUrl, which names the page's link: backend/app/trust/provenance.py), sends the run of
#: ``#jaxplay-early`` with seq 1 once the socket is open, and
#: keeps what the server sends until the page adopts the socket. Constant: its hash
#: is in the page's CSP.
EARLY_SCRIPT = (
    "(function(){var t=document.getElementById('jaxplay-early');if(!t)return;"
    "try{var r=JSON.parse(t.textContent),l=location,"
    "k=/^\\/[se]\\/([a-z2-7]{8,52})$/.exec(l.pathname),"
    "s=new WebSocket((l.protocol==='https:'?'wss:':'ws:')+'//'+l.host+'/api/v1/ws'"
    "+(k?'?link='+k[1]:'')),"
    "e={socket:s,request:r,seq:1,sent:false,messages:[]};"
    "s.onmessage=function(m){e.messages.push(m)};"
    "s.addEventListener('open',function(){"
    "s.send(JSON.stringify({type:'run',seq:1,payload:r}));e.sent=true});"
    "window.__jaxplayEarly=e}catch(x){}})();"
)

#: the CSP source that allows ``EARLY_SCRIPT`` (and no other inline script)
EARLY_SCRIPT_CSP = (
    f"'sha256-{base64.b64encode(hashlib.sha256(EARLY_SCRIPT.encode()).digest()).decode()}'"
)

EARLY_ID = "jaxplay-early"


def early_tags(stored: Any, script_json: Any) -> str:
    """The run's JSON tag and the script that sends it, for the link that stores
    ``stored`` (its parsed JSON), or "" when ``page_request`` does not know the page's
    run of this link. ``script_json`` escapes the JSON for an inert tag
    (backend/app/web/page.py ``_script_json``)."""
    request = page_request(stored) if isinstance(stored, dict) else None
    if request is None:
        return ""
    data = script_json(request)
    return (
        f'<script type="application/json" id="{EARLY_ID}">{data}</script>'
        f"<script>{EARLY_SCRIPT}</script>"
    )
