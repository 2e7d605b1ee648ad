"""The ``recompiles`` output: why JAX traced and compiled again, at each call site.

The snippet's top-level code, then one call of the entry on the example arguments,
run with JAX's cache-miss explanations on (core/cache_misses.py); per call site (a
line and the function called there): its calls, hits and misses, each miss with JAX's
own explanation and its trace, lower and compile milliseconds, and their sums. The
engine's own compiles of each pipeline are not counted (they are first-time misses of
its making, outside the capture).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from sandbox.engine.core.cache_misses import CacheMisses, Miss, Site
from sandbox.engine.core.output import Output, RunContext, RunHandle, RunHooks
from sandbox.protocol.limits import MAX_MESSAGE_CHARS, MAX_RECOMPILE_MISSES, MAX_RECOMPILE_SITES

_CHANGED = re.compile(r"\*\s*at (.+?), now (.+?) and before (.+?)\s*$", re.MULTILINE)
#: JAX 0.4's spelling: "* at x, seen f32[3], but now given f32[4]"
_CHANGED_04 = re.compile(r"\*\s*at (.+?), seen (.+?), but now given (.+?)\s*$", re.MULTILINE)
SILENT = "JAX gave no explanation for this compile"
EAGER = (
    "an operation applied outside any jit: JAX compiles it once per shape and dtype, "
    "and explains nothing"
)
TARGET_JITTED = (
    "JAX explains no miss of a jit whose target is itself jitted (jax.jit(jnp.sin)): "
    "it compiled, but JAX does not say why"
)


def reason(explanation: str | None) -> str:
    """JAX's explanation in a few words: what changed since the closest key."""
    if explanation is None:
        return SILENT
    if "never seen function" in explanation:
        return "first call"
    changed = _CHANGED.findall(explanation)
    if changed:
        return "; ".join(f"{at}: {before} → {now}" for at, now, before in changed[:3])
    changed = _CHANGED_04.findall(explanation)
    if changed:
        return "; ".join(f"{at}: {before} → {now}" for at, before, now in changed[:3])
    lines = [line.strip(" *") for line in explanation.splitlines()[1:] if line.strip()]
    wanted = [line for line in lines if not line.startswith(("for ", "all previously"))]
    return (wanted or lines or [explanation])[0][:200]


def _ms(values: list[float | None]) -> float:
    return round(sum(v for v in values if v is not None), 3)


def _miss(miss: Miss) -> dict[str, Any]:
    return {
        "explanation": miss.explanation[:MAX_MESSAGE_CHARS] if miss.explanation else None,
        "reason": reason(miss.explanation),
        "trace_ms": _round(miss.trace_ms),
        "lower_ms": _round(miss.lower_ms),
        "compile_ms": _round(miss.compile_ms),
        "from_disk": miss.from_disk,
    }


def _round(ms: float | None) -> float | None:
    return None if ms is None else round(ms, 3)


def summary(site: Site, counted: bool) -> str:
    """ "2 compiles, 1 hit — x: f32[3] → f32[4]": what the page marks the line with."""
    misses = len(site.misses)
    parts = [f"{misses} compile{'s' if misses != 1 else ''}"]
    if counted and site.calls:
        hits = max(site.calls - misses, 0)
        parts.append(f"{hits} hit{'s' if hits != 1 else ''}")
    reasons = [reason(m.explanation) for m in site.misses if m.explanation is not None]
    changes = [r for r in reasons if r != "first call"]
    why = changes[-1] if changes else (reasons[0] if reasons else None)
    if why is None and misses:
        why = "JAX gave no explanation"
    return ", ".join(parts) + (f" — {why}" if why else "")


def site_event(site: Site, counted: bool, timed: bool = True) -> dict[str, Any]:
    misses = site.misses
    # a jitted function's call seen here (where calls are not counted: JAX explained a miss)
    jitted = site.calls > 0 if counted else any(m.explanation for m in misses)
    return {
        "line": site.line,
        "function": site.function[:200],
        "caller": site.caller[:200],
        "jitted": jitted,
        "calls": site.calls if counted else None,
        # a silent miss is not seen where JAX's durations name no function: no hits then
        "hits": max(site.calls - len(misses), 0) if counted and timed and site.calls else None,
        "miss_count": len(misses),
        "misses": [_miss(m) for m in misses[:MAX_RECOMPILE_MISSES]],
        "trace_ms": _ms([m.trace_ms for m in misses]),
        "lower_ms": _ms([m.lower_ms for m in misses]),
        "compile_ms": _ms([m.compile_ms for m in misses]),
        "summary": summary(site, counted and timed),
        "silent": (
            EAGER
            if not jitted
            else TARGET_JITTED
            if site.target_jitted and not any(m.explanation for m in misses)
            else (SILENT if misses and not any(m.explanation for m in misses) else None)
        ),
    }


def recompiles_event(captured: CacheMisses, notes: list[str]) -> dict[str, Any]:
    captured.finish()
    sites = sorted(captured.sites.values(), key=lambda s: (s.line, s.function))
    # a site is a call site of a jitted function, or a line where something compiled
    shown = [s for s in sites if s.misses or s.calls]
    if len(shown) > MAX_RECOMPILE_SITES:
        notes.append(f"{len(shown)} call sites; the first {MAX_RECOMPILE_SITES} are shown")
    if not captured.explains:
        notes.append("this JAX version cannot explain its cache misses (jax_explain_cache_misses)")
    timed = captured.durations_named
    if not timed:
        notes.append(
            "this JAX version reports its trace, lower and compile times without naming the "
            "function: the misses are JAX's explanations alone, without times, and a miss JAX "
            "does not explain (a jit of a jitted function) is not seen, so hits are not counted"
        )
    if not captured.counts_calls:
        notes.append(
            "calls (and so hits) are counted with Python 3.12's sys.monitoring; this "
            "environment's Python has none: only the misses are shown"
        )
    return {
        "type": "recompiles",
        "sites": [site_event(s, captured.counts_calls, timed) for s in shown[:MAX_RECOMPILE_SITES]],
        "counts_calls": captured.counts_calls,
        "notes": notes,
    }


class RecompilesHooks(RunHooks):
    def __init__(self, run: RunHandle) -> None:
        super().__init__(run)
        self.captured = CacheMisses()
        self.notes: list[str] = []

    def around_exec(self) -> contextlib.AbstractContextManager[None]:
        return self.captured.capturing()

    def before_pipelines(self, context: RunContext) -> None:
        """One call of the entry on the example arguments, as the user would call it."""
        if context.abstract:
            self.notes.append(
                "the arguments are shapes and dtypes only: the entry was not called, only "
                "the snippet's top-level code is counted"
            )
            return
        import jax

        with self.captured.capturing():
            try:
                jax.block_until_ready(context.entry(*context.args))
            except Exception as exc:  # the pipelines say where, as an error event
                self.notes.append(
                    f"calling {context.request.entry} on the arguments raised "
                    f"{type(exc).__name__}: {str(exc)[:300]}"
                )

    def report(self) -> None:
        self.run.render(OUTPUT.what, lambda: recompiles_event(self.captured, self.notes))


OUTPUT = Output("run", "collecting JAX's cache misses", hooks=RecompilesHooks)
