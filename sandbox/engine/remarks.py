"""The ``remarks`` output: why JAX traced or compiled again, at the user's lines.

While the run executes the snippet and its pipelines, JAX's cache-miss
explanations (``jax_explain_cache_misses``) are on and the warnings JAX logs for
them are collected; each becomes a remark at the snippet line it names.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from typing import Any

from sandbox.protocol import MAX_MESSAGE_CHARS, MAX_REMARKS, SNIPPET_FILENAME

_LINE = re.compile(re.escape(SNIPPET_FILENAME) + r":(\d+)")


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.items: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        # an object's id differs from run to run: it is not part of the reason
        message = re.sub(r" id=\d+", "", record.getMessage())
        if "cache miss" not in message.lower() or len(self.items) >= MAX_REMARKS:
            return
        lines = [int(n) for n in _LINE.findall(message)]
        self.items.append(
            {
                "kind": "cache-miss",
                "line": lines[0] if lines else None,  # where it missed
                "message": message[:MAX_MESSAGE_CHARS],
            }
        )


@contextlib.contextmanager
def collecting(wanted: bool) -> Iterator[list[dict[str, Any]] | None]:
    """The remarks list, filled while the block runs (None when not wanted, or
    when this JAX version cannot explain its cache misses)."""
    import jax

    if not wanted or "jax_explain_cache_misses" not in jax.config.values:
        yield None
        return
    collector = _Collector()
    logger = logging.getLogger("jax")
    logger.addHandler(collector)
    saved = jax.config.values["jax_explain_cache_misses"]
    jax.config.update("jax_explain_cache_misses", True)
    try:
        yield collector.items
    finally:
        jax.config.update("jax_explain_cache_misses", saved)
        logger.removeHandler(collector)


def remarks_event(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    if items is None:
        note = "this JAX version cannot explain its cache misses (jax_explain_cache_misses)"
        return {"type": "remarks", "items": [{"kind": "note", "line": None, "message": note}]}
    return {"type": "remarks", "items": items}
