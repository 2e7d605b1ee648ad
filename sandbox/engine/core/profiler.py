"""JAX's profiler over one stretch of the run (a compile, or the ``profile``
output's calls): the trace's events, read back from a private folder under the
run's ``/tmp`` (deleted afterwards)."""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class Trace:
    """What one profiled stretch left: the trace's events, or why there are none."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.note = ""


@contextlib.contextmanager
def tracing(wanted: bool = True) -> Iterator[Trace | None]:
    """Profile what runs inside (None when not ``wanted``); the Trace's events are
    there once the block has ended. A profiler that cannot start or stop (one the
    user's code left running) leaves a note, never an error of the run."""
    import inspect

    import jax

    if not wanted:
        yield None
        return
    trace = Trace()
    folder = Path(tempfile.mkdtemp(prefix="jaxplay-profile-"))
    try:
        kwargs: dict[str, Any] = {"create_perfetto_trace": True}
        if "profiler_options" in inspect.signature(jax.profiler.start_trace).parameters:
            options = jax.profiler.ProfileOptions()
            options.python_tracer_level = 0  # Python frames: noise, and costly
            kwargs["profiler_options"] = options
        try:
            jax.profiler.start_trace(str(folder), **kwargs)
        except Exception as exc:
            trace.note = f"JAX's profiler did not start: {type(exc).__name__}: {exc}"
            yield trace
            return
        try:
            yield trace
        finally:
            try:
                jax.profiler.stop_trace()
                trace.events = _read(folder)
            except Exception as exc:
                trace.note = f"JAX's profiler did not stop: {type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _read(folder: Path) -> list[dict[str, Any]]:
    for path in sorted(folder.glob("plugins/profile/*/perfetto_trace.json.gz")):
        with gzip.open(path, "rt") as file:
            data = json.load(file)
        found = data.get("traceEvents", []) if isinstance(data, dict) else data
        return [e for e in found if isinstance(e, dict)]
    return []
