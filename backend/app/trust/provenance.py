"""Whose code a run is: the rule that keeps code a person did not write out of the
process that serves their later runs (issue 33).

A page opened from a shared link (``/s/{id}``) or an embed (``/e/{id}``) names the
link on its WebSocket (``/api/v1/ws?link=ID``: frontend/src/connection/connection.ts ``wsUrl``,
and the server's early-run script, backend/app/web/early_run.py). The server reads that
snippet from its own store, never the code from the client, and every run on that
connection whose code is the link's code (``same_code``: equal but for trailing
blanks) is *not the caller's own*: it runs with ``Caller.keeps_process`` False, in a
process, zygote and jail that serve that run alone and retire after it
(sandbox/protocol/tenants.py). Once the person edits the code, the run is theirs: a
run of what they wrote (or chose to keep of someone's code while editing it) may
shape their own kept process, as any of their edits may.

The page's word can only make a run single-use, never the reverse: a client that
omits ``link`` runs as its own tenant with its own code, which is what it would get
anyway; a client that names a link it did not open only gives up its own kept
process. What protects a reader is that the page they opened (this server's) says
so; nothing another person sends can make the reader's page say otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: the query parameter of ``/api/v1/ws`` that names the page's link
LINK_PARAM = "link"


def _normal(code: str) -> str:
    """The code with what an editor adds or drops at line ends and the end removed."""
    return "\n".join(line.rstrip() for line in code.strip().splitlines())


@dataclass(frozen=True)
class LinkCode:
    """The code of the link a connection's page opened; ``unknown``: the link could
    not be read (the store failed), so every run of the connection is taken as not
    the caller's own."""

    code: str | None = None
    unknown: bool = False

    def same_code(self, code: str) -> bool:
        """Whether a run of ``code`` is the link's code, not the caller's own."""
        return self.unknown or (self.code is not None and _normal(code) == _normal(self.code))


NO_LINK = LinkCode()
UNKNOWN = LinkCode(unknown=True)


def link_code(body: str | None) -> LinkCode:
    """The code of a stored snippet (its canonical JSON; None: no such snippet)."""
    if body is None:
        return NO_LINK
    try:
        code = json.loads(body).get("code")
    except (ValueError, AttributeError):
        return UNKNOWN
    return LinkCode(code=code) if isinstance(code, str) else UNKNOWN
