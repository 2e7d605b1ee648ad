"""A primitive's or op's docs, as the page shows them on hover (frontend/src/editor/opdocs.ts's
``docFor``), from the same tables: ``frontend/src/generated/jaxpr-primitives.json`` and
``stablehlo-ops.json`` (made by scripts/gen_op_docs.py from the installed JAX and the
StableHLO descriptions jaxlib ships) and ``frontend/src/hlo-ops.json`` (HLO-only opcodes).
Read once, on first use; nothing is imported from JAX.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

_FRONTEND = Path(__file__).resolve().parents[3] / "frontend" / "src"
TABLES = {
    "jaxpr": _FRONTEND / "generated" / "jaxpr-primitives.json",
    "stablehlo": _FRONTEND / "generated" / "stablehlo-ops.json",
    "hlo": _FRONTEND / "hlo-ops.json",
}

DocKind = Literal["jaxpr", "stablehlo", "hlo"]
#: the order a name with no kind is looked up in
KINDS: tuple[DocKind, ...] = ("jaxpr", "stablehlo", "hlo")


class OpDoc(BaseModel):
    kind: DocKind = Field(description="Which text the name is from: jaxpr, StableHLO or HLO.")
    title: str
    summary: str
    signature: str = Field(
        description="How it is called: the JAX function (jaxpr), the operands and attributes."
    )
    transforms: list[str] = Field(description="Transformations with rules for it (jaxpr).")
    url: str


@functools.cache
def _table(kind: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(TABLES[kind].read_text())
    return data


def _operands(op: dict[str, Any]) -> str:
    names = op.get("operands") or []
    return f"operands and attributes: {', '.join(names)}" if names else ""


def doc_for(kind: DocKind, op: str) -> OpDoc | None:
    """The doc of ``op`` as a ``kind`` text names it; None when the tables lack it."""
    ops: dict[str, Any] = _table("stablehlo")["ops"]
    if kind == "jaxpr":
        p = _table("jaxpr")["primitives"].get(op)
        if p is None:
            return None
        return OpDoc(
            kind=kind,
            title=op,
            summary=p["summary"],
            signature=p["signature"],
            transforms=list(p["transforms"]),
            url=p["url"],
        )
    if kind == "stablehlo":
        name = op.removeprefix("stablehlo.")
        o = ops.get(name)
        if o is None:
            return None
        return OpDoc(
            kind=kind,
            title=f"stablehlo.{name}",
            summary=o["summary"],
            signature=_operands(o),
            transforms=[],
            url=o["url"],
        )
    hlo = _table("hlo")
    only = hlo["hlo_only"].get(op)
    if only is not None:
        return OpDoc(
            kind=kind, title=op, summary=only, signature="", transforms=[], url=hlo["xla_semantics"]
        )
    o = ops.get(hlo["hlo_to_stablehlo"].get(op, op.replace("-", "_")))
    if o is None:
        return None
    return OpDoc(
        kind=kind,
        title=op,
        summary=o["summary"],
        signature=_operands(o),
        transforms=[],
        url=o["url"],
    )


def lookup(name: str, kind: DocKind | None = None) -> list[OpDoc]:
    """Every doc ``name`` has: of ``kind``, or of each kind that knows it (``add`` is a
    jaxpr primitive, a StableHLO op and an HLO opcode)."""
    name = name.strip()
    found = (doc_for(k, name) for k in ((kind,) if kind is not None else KINDS))
    return [doc for doc in found if doc is not None]


def known_names(kind: DocKind) -> list[str]:
    if kind == "jaxpr":
        return sorted(_table("jaxpr")["primitives"])
    if kind == "stablehlo":
        return sorted(_table("stablehlo")["ops"])
    return sorted(_table("hlo")["hlo_only"])
