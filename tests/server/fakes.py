"""The server's fake pool: sandbox.pool.fake's, with events that tell runs apart.

Markers in the request's code steer a run (see sandbox/pool/fake.py): ``# fake:
slow=0.2``, ``hang``, ``error``, ``nodone``, ``ignore-cancel``. Each run's jaxpr
text carries the length of its code and its value ``run N`` (N counts the pool's
runs), so a test can tell a cached answer from a fresh one.
"""

from __future__ import annotations

from typing import Any

from sandbox.pool.fake import WORKER, FakeRun
from sandbox.pool.fake import FakePool as _FakePool

__all__ = ["WORKER", "FakePool", "FakeRun"]


def numbered_script(run: FakeRun) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "stage", "stage": "trace", "ms": 1.5},
        {
            "type": "jaxpr",
            "text": f"{{ lambda ; . let  in ({len(run.request.code)},) }}",
            "sources": [],
        },
        {"type": "value", "repr": f"run {run.number}", "tree": []},
    ]
    if "timing" in run.request.outputs:
        events.append({"type": "timing", "rows": [{"label": "f", "runs": run.number}]})
    if run._marker("error") is not None:
        events.append(
            {
                "type": "error",
                "stage": "exec",
                "kind": "NameError",
                "message": "x",
                "line": 1,
                "hint": "",
            }
        )
    return events


class FakePool(_FakePool):
    def __init__(self, max_concurrent: int = 4) -> None:
        super().__init__(max_concurrent, script=numbered_script)
