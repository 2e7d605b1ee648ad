"""JAX's cache misses at the user's call sites, captured while the snippet runs (the
``recompiles`` output, outputs/recompiles.py).

Three of JAX's own reports, joined by the line of the user's code they happen at:

- each miss's explanation: with ``jax_explain_cache_misses`` on JAX logs "TRACING
  CACHE MISS at <snippet>:LINE …" (a warning on the ``jax`` logger's children:
  ``jax._src.interpreters.partial_eval`` in 0.10 and 0.12, ``jax._src.pjit`` before);
- each miss's cost: JAX reports the trace, the lowering and XLA's compile of every
  miss as ``jax.monitoring`` durations (``/jax/core/compile/jaxpr_trace_duration``,
  ``…/jaxpr_to_mlir_module_duration``, ``…/backend_compile_duration``) named by the
  function; the line is the innermost frame of the snippet on the stack then;
- each call of a jitted function (a hit leaves no other trace): Python 3.12's
  ``sys.monitoring`` CALL events at the snippet's lines, where the called object is
  a jitted function. Without ``sys.monitoring`` (Python 3.11) calls are not counted,
  and the event says so.

A miss is a trace (or a lowering and compile without one); the explanation JAX logged
at that line just before it is its explanation. JAX explains nothing for some misses
(``jax.jit(jnp.sin)``: the target is itself jitted); those keep no explanation and the
site says so.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sandbox.protocol.requests import SNIPPET_FILENAME

TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"
#: the executable came from JAX's persistent compilation cache (no XLA compile)
PERSISTENT_HIT = "/jax/compilation_cache/cache_hits"
_AT_LINE = re.compile(re.escape(SNIPPET_FILENAME) + r":(\d+)")
#: "jit(g)" (the lowered module's name) is the function ``g``
_JIT_NAME = re.compile(r"^(?:jit|pjit)\((.*)\)$")
#: the function an explanation is about ("never seen function:\n    g", "for g defined at")
_EXPLAINED_NAME = re.compile(r"never seen function:\s+(\S+)|\bfor (\S+) defined at")
#: the tool id jaxplay claims in sys.monitoring (profilers and debuggers use 0-2, 5)
_TOOL_IDS = (4, 3)


@dataclass
class Miss:
    """One trace (and lowering, compile) at a call site."""

    explanation: str | None = None
    trace_ms: float | None = None
    lower_ms: float | None = None
    compile_ms: float | None = None
    #: the executable came from the persistent compilation cache
    from_disk: bool = False


@dataclass
class Site:
    """A call site: a line of the snippet and the function called there."""

    line: int
    function: str
    #: the snippet's function the line is in (``<module>`` at top level)
    caller: str = "<module>"
    #: calls of a jitted function named ``function`` seen at this line
    calls: int = 0
    misses: list[Miss] = field(default_factory=list)
    #: the called function is jitted and its target is itself jitted (JAX explains nothing)
    target_jitted: bool = False


def _snippet_frame() -> Any:
    """The innermost frame of the snippet's code on the stack (None outside it)."""
    frame: Any = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != SNIPPET_FILENAME:
        frame = frame.f_back
    return frame


def is_jitted(fn: Any) -> bool:
    """A function ``jax.jit`` made (jaxlib's PjitFunction, or its Python fallback)."""
    return callable(fn) and hasattr(fn, "lower") and hasattr(fn, "_cache_size")


class CacheMisses:
    """The misses and calls seen while ``capturing()`` is held, per call site."""

    def __init__(self) -> None:
        self.sites: dict[tuple[int, str], Site] = {}
        #: explanations logged at a line, waiting for that line's next trace
        self._pending: dict[int, list[str]] = {}
        #: the jitted function last called at each line
        self._last_called: dict[int, str] = {}
        #: every explanation with its line, and the snippet function each line is in
        self._explained: list[tuple[int, str]] = []
        self._callers: dict[int, str] = {}
        #: JAX's durations name their function (JAX 0.5 and later)
        self.durations_named = True
        #: the calls could be counted (sys.monitoring: Python 3.12+)
        self.counts_calls = hasattr(sys, "monitoring")
        #: JAX can explain its misses (``jax_explain_cache_misses`` exists)
        self.explains = True

    def site(self, line: int, function: str, caller: str) -> Site:
        key = (line, function)
        if key not in self.sites:
            self.sites[key] = Site(line, function, caller)
        return self.sites[key]

    # -- JAX's reports ---------------------------------------------------------------
    def on_log(self, message: str) -> None:
        if "cache miss" not in message.lower():
            return
        lines = _AT_LINE.findall(message)
        if lines:
            # an object's id differs from run to run: it is not part of the reason
            text = re.sub(r" id=\d+", "", message)
            self._explained.append((int(lines[0]), text))
            if not self._explains_traced(int(lines[0]), text):
                self._pending.setdefault(int(lines[0]), []).append(text)
            frame = _snippet_frame()
            if frame is not None:
                self._callers.setdefault(int(lines[0]), frame.f_code.co_name)

    def on_duration(self, event: str, secs: float, fun_name: str) -> None:
        if event not in (TRACE, LOWER, COMPILE):
            return
        frame = _snippet_frame()
        if frame is None:
            return  # jaxplay's own work, not the snippet's
        if not fun_name:
            # JAX before 0.5 names no function in its durations: they cannot be told
            # apart, and the misses are its explanations alone (``finish``)
            self.durations_named = False
            return
        line = frame.f_lineno
        match = _JIT_NAME.match(fun_name)
        site = self.site(line, match.group(1) if match else fun_name, frame.f_code.co_name)
        ms = secs * 1000
        last = site.misses[-1] if site.misses else None
        if event == TRACE or last is None or (event == LOWER and last.lower_ms is not None):
            last = Miss()
            waiting = self._pending.get(site.line)
            if waiting:
                last.explanation = waiting.pop(0)
            site.misses.append(last)
        if event == TRACE:
            last.trace_ms = ms
        elif event == LOWER:
            last.lower_ms = ms
        else:
            last.compile_ms = ms

    def _explains_traced(self, line: int, text: str) -> bool:
        """JAX 0.6 explains a miss once it is traced (0.10 on: before): the miss at
        ``line`` of the function the explanation names, traced and not yet lowered,
        takes it."""
        named = _EXPLAINED_NAME.search(text)
        site = self.sites.get((line, (named.group(1) or named.group(2)) if named else ""))
        last = site.misses[-1] if site and site.misses else None
        if last is None or last.explanation is not None or last.trace_ms is None:
            return False
        if last.lower_ms is not None or last.compile_ms is not None:
            return False
        last.explanation = text
        return True

    def finish(self) -> None:
        """Where JAX's durations name no function, each explanation is a miss (at its
        line, of the function it names), without times."""
        if self.durations_named:
            # a trace that was neither explained, lowered nor compiled is a function
            # traced inside another's trace (its time is in the outer trace's): no miss
            for site in self.sites.values():
                site.misses = [
                    m
                    for m in site.misses
                    if m.explanation or m.lower_ms is not None or m.compile_ms is not None
                ]
            return
        for site in self.sites.values():
            site.misses = []
        for line, text in self._explained:
            named = _EXPLAINED_NAME.search(text)
            name = (named.group(1) or named.group(2)) if named else self._last_called.get(line, "?")
            self.site(line, name, self._callers.get(line, "<module>")).misses.append(Miss(text))

    def on_persistent_hit(self) -> None:
        frame = _snippet_frame()
        if frame is None:
            return
        for site in self.sites.values():
            if site.line == frame.f_lineno and site.misses:
                site.misses[-1].from_disk = True

    def on_call(self, fn: Any, line: int, caller: str) -> None:
        name = getattr(fn, "__name__", None) or type(fn).__name__
        site = self.site(line, str(name), caller)
        self._last_called[line] = str(name)
        site.calls += 1
        site.target_jitted = is_jitted(getattr(fn, "__wrapped__", None))

    # -- capture ---------------------------------------------------------------------
    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """Explanations on, JAX's durations and the snippet's jitted calls recorded."""
        import jax
        from jax._src import monitoring

        with contextlib.ExitStack() as stack:
            if "jax_explain_cache_misses" in jax.config.values:
                saved = jax.config.values["jax_explain_cache_misses"]
                jax.config.update("jax_explain_cache_misses", True)
                stack.callback(jax.config.update, "jax_explain_cache_misses", saved)
            else:
                self.explains = False
            handler = _LogHandler(self)
            logger = logging.getLogger("jax")
            logger.addHandler(handler)
            stack.callback(logger.removeHandler, handler)

            def duration(event: str, duration_secs: float, **kwargs: str | int) -> None:
                self.on_duration(event, duration_secs, str(kwargs.get("fun_name", "")))

            def counted(event: str, **kwargs: str | int) -> None:
                if event == PERSISTENT_HIT:
                    self.on_persistent_hit()

            monitoring.register_event_duration_secs_listener(duration)
            stack.callback(_unregister, monitoring, "duration", duration)
            monitoring.register_event_listener(counted)
            stack.callback(_unregister, monitoring, "event", counted)
            if self.counts_calls:
                stack.enter_context(self._counting_calls())
            yield

    @contextlib.contextmanager
    def _counting_calls(self) -> Iterator[None]:
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        tool = next((t for t in _TOOL_IDS if mon.get_tool(t) is None), None)
        if tool is None:
            self.counts_calls = False
            yield
            return
        mon.use_tool_id(tool, "jaxplay-recompiles")
        from jax.core import Tracer as tracer

        def on_call(code: Any, offset: int, fn: Any, arg0: Any) -> Any:
            if code.co_filename != SNIPPET_FILENAME:
                return mon.DISABLE  # never again at this place: only the snippet's calls count
            # a jit called while another is traced is inlined there: not a call that
            # can hit or miss (its first argument a tracer says so)
            if is_jitted(fn) and not isinstance(arg0, tracer):
                frame = sys._getframe(1)
                self.on_call(fn, frame.f_lineno, code.co_name)
            return None

        mon.register_callback(tool, mon.events.CALL, on_call)
        mon.set_events(tool, mon.events.CALL)
        try:
            yield
        finally:
            mon.set_events(tool, 0)
            mon.register_callback(tool, mon.events.CALL, None)
            mon.free_tool_id(tool)


class _LogHandler(logging.Handler):
    def __init__(self, misses: CacheMisses) -> None:
        super().__init__(logging.WARNING)
        self.misses = misses

    def emit(self, record: logging.LogRecord) -> None:
        self.misses.on_log(record.getMessage())


def _unregister(monitoring: Any, kind: str, listener: Any) -> None:
    """Take a listener off JAX's monitoring (the name of the call differs by version)."""
    names = {
        "duration": (
            "unregister_event_duration_listener",
            "_unregister_event_duration_listener_by_callback",
        ),
        "event": ("unregister_event_listener", "_unregister_event_listener_by_callback"),
    }[kind]
    for name in names:
        if hasattr(monitoring, name):
            getattr(monitoring, name)(listener)
            return
    raise RuntimeError(f"this JAX cannot unregister a monitoring listener ({names[0]})")
