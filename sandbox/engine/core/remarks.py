"""A run's remarks, collected while it runs, at the user's lines: why JAX traced or
compiled again, what a checkpointed pipeline saves, the warnings the run raised,
what jaxplay did to a Pallas call (core/pallas.py). The ``remarks`` output
(outputs/remarks.py) collects them and shows them; a run that does not ask for it
collects none.

- ``cache-miss``: while the snippet's top-level code runs, JAX's cache-miss
  explanations (``jax_explain_cache_misses``) are on and the warnings JAX logs for
  them are collected (only there: the engine's own compiles of each pipeline would
  be first-time misses of its own making).
- ``residual``: for a pipeline with a ``checkpoint`` step, each value its
  linearisation saves for the backward pass (``saved_residuals`` of the pipeline up
  to that step), with the line that computed it.
- ``warning``: Python warnings raised from the snippet's code on through every
  pipeline (donated buffers XLA could not use, dtype truncation, ...); they are
  still printed as before.
"""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections.abc import Iterator
from typing import Any, TextIO

from sandbox.protocol.limits import MAX_MESSAGE_CHARS, MAX_REMARKS
from sandbox.protocol.requests import SNIPPET_FILENAME

_LINE = re.compile(re.escape(SNIPPET_FILENAME) + r":(\d+)")


def _line_in(message: str) -> int | None:
    """The first snippet line a message names (where JAX says it happened)."""
    lines = _LINE.findall(message)
    return int(lines[0]) if lines else None


class Remarks:
    """One run's remarks, collected while it runs."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.notes: list[str] = []

    def add(self, kind: str, line: int | None, message: str) -> None:
        if len(self.items) < MAX_REMARKS:
            # an object's id differs from run to run: it is not part of the reason
            message = re.sub(r" id=\d+", "", message)
            self.items.append({"kind": kind, "line": line, "message": message[:MAX_MESSAGE_CHARS]})

    @contextlib.contextmanager
    def explaining_cache_misses(self) -> Iterator[None]:
        import jax

        if "jax_explain_cache_misses" not in jax.config.values:
            self.notes.append(
                "this JAX version cannot explain its cache misses (jax_explain_cache_misses)"
            )
            yield
            return
        remarks = self

        class Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                message = record.getMessage()
                if "cache miss" in message.lower():
                    remarks.add("cache-miss", _line_in(message), message)

        handler = Handler(logging.WARNING)
        logger = logging.getLogger("jax")
        logger.addHandler(handler)
        saved = jax.config.values["jax_explain_cache_misses"]
        jax.config.update("jax_explain_cache_misses", True)
        try:
            yield
        finally:
            jax.config.update("jax_explain_cache_misses", saved)
            logger.removeHandler(handler)

    @contextlib.contextmanager
    def catching_warnings(self) -> Iterator[None]:
        """Each warning shown meanwhile is also a remark (and still shown)."""
        shown = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            at = lineno if filename == SNIPPET_FILENAME else _line_in(str(message))
            self.add("warning", at, f"{category.__name__}: {message}")
            shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        try:
            yield
        finally:
            warnings.showwarning = shown

    def residuals(self, fn: Any, args: tuple[Any, ...], label: str) -> None:
        """What ``fn``'s linearisation saves, one remark per residual."""
        try:
            from jax._src.ad_checkpoint import saved_residuals
        except ImportError:
            self.notes.append("this JAX version cannot list a checkpoint's saved residuals")
            return
        try:
            saved = saved_residuals(fn, *args)
        except Exception as exc:  # e.g. integer inputs: nothing to differentiate
            self.notes.append(f"{label}: no saved residuals ({type(exc).__name__}: {exc})"[:500])
            return
        for aval, why in saved:
            shape = aval.str_short() if hasattr(aval, "str_short") else str(aval)
            self.add("residual", _line_in(why), f"{label} saves {shape} {why}")

    def event(self) -> dict[str, Any]:
        notes = [{"kind": "note", "line": None, "message": n} for n in self.notes]
        return {"type": "remarks", "items": (self.items + notes)[:MAX_REMARKS]}
