"""Pallas on the CPU worker: interpret mode, for every run that qualifies (whatever
it asks for; the ``kernels`` output is outputs/kernels.py).

This CPU jaxlib lowers a ``pallas_call`` only in interpret mode
(without ``interpret=`` it raises "Only interpret mode is supported on CPU backend").
On a run that executes on the CPU (no ``lowering_platforms``, ``tpu_topology`` or
``gpu_target``) and whose code names ``pallas``, ``jax.experimental.pallas.
pallas_call`` is, for that run only, a wrapper that gives a call without
``interpret`` one: ``True`` (the request's ``pallas_interpret`` "auto": JAX's
interpreter, a ``jit`` of a loop over the grid) or, for "tpu_races", ``pltpu.
InterpretParams(detect_races=True, on_race="warn", uninitialized_memory="nan")``
(the TPU-simulating interpreter; its race reports, logged by JAX, become remarks at
the kernel's lines). The module attribute is put back when the run ends: the check
of a kept process (sandbox/zygote/watch.py) compares every module's attributes by
identity, and a wrapper left behind would retire it (or, worse, reach the next run).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import sys
import threading
from collections.abc import Iterator
from typing import Any

from sandbox.engine.core.remarks import Remarks
from sandbox.protocol.requests import SNIPPET_FILENAME, RunRequest

_SNIPPET_LINE = re.compile(re.escape(SNIPPET_FILENAME) + r'"?:(\d+)')


def patches(request: RunRequest) -> bool:
    """Whether this run's ``pallas_call`` is wrapped: its code names pallas and it runs
    on this worker's CPU (a lowering or compile for other hardware keeps JAX's own)."""
    return (
        "pallas" in request.code
        and request.backend in ("cpu", "auto")
        and not request.lowering_platforms
        and request.tpu_topology is None
        and request.gpu_target is None
    )


def _caller_line() -> int | None:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == SNIPPET_FILENAME:
            return frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _tpu_interpret_params() -> tuple[Any, str | None]:
    """The TPU-simulating interpret mode with race detection, as far as this JAX
    version has it; else ``True`` and why."""
    try:
        from jax.experimental.pallas import tpu as pltpu
    except ImportError:
        return True, "this JAX version has no Pallas TPU interpreter: interpret=True instead"
    params_cls = getattr(pltpu, "InterpretParams", None)
    if params_cls is None:
        return True, "this JAX version has no pltpu.InterpretParams: interpret=True instead"
    import dataclasses

    fields = {f.name for f in dataclasses.fields(params_cls)}
    wanted = {"detect_races": True, "on_race": "warn", "uninitialized_memory": "nan"}
    missing = sorted(set(wanted) - fields)
    note = f"this JAX version's InterpretParams lacks {missing}" if missing else None
    return params_cls(**{k: v for k, v in wanted.items() if k in fields}), note


class _RaceHandler(logging.Handler):
    """JAX's race reports (logged to ``jax...`` and to the root logger): a remark at the
    first snippet line each names, else (no remarks asked for) the run's stderr."""

    def __init__(self, remarks: Remarks | None) -> None:
        super().__init__(logging.WARNING)
        self.remarks = remarks

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "RACE DETECTED" not in message:
            return
        # the vector clocks print as object addresses: not part of the report
        kept = [t for t in message.splitlines() if not t.strip().startswith("clock:")]
        text = "\n".join(kept)
        if self.remarks is None:
            print(f"jaxplay: {text}", file=sys.stderr)
            return
        # one remark at each line it names (the write, then the access it races with)
        named: list[int | None] = list(dict.fromkeys(int(n) for n in _SNIPPET_LINE.findall(text)))
        for line in named[:2] or [None]:
            self.remarks.add("race", line, text)


@contextlib.contextmanager
def interpreting(request: RunRequest, remarks: Remarks | None) -> Iterator[None]:
    """The run's ``pallas_call`` with interpret mode by default (see the docstring);
    nothing when the run does not qualify."""
    if not patches(request):
        yield
        return
    try:
        import jax
        import jax.experimental.pallas as pallas
    except ImportError:  # a JAX without Pallas: the run's own import says so
        yield
        return
    original = pallas.pallas_call
    mode = request.pallas_interpret
    said: set[int | None] = set()

    @functools.wraps(original)
    def pallas_call(*args: Any, **kwargs: Any) -> Any:
        if "interpret" not in kwargs and jax.default_backend() == "cpu":
            line = _caller_line()
            if mode == "tpu_races":
                kwargs["interpret"], why = _tpu_interpret_params()
                how = "TPU-simulating interpret mode with race detection"
            else:
                kwargs["interpret"], why = True, None
                how = "interpret mode (interpret=True)"
            if remarks is not None and line not in said:
                said.add(line)
                message = (
                    f"pallas_call runs in {how}: this CPU worker has no TPU or GPU to "
                    "lower it for (jaxplay added the interpret argument)"
                )
                remarks.add("pallas", line, message + (f"; {why}" if why else ""))
        return original(*args, **kwargs)

    # JAX's race reports, whichever interpret mode asked for them (the run's own
    # InterpretParams too); it also keeps the root logger's logging.warning from
    # configuring it (basicConfig) in a process that may be kept
    handler = _RaceHandler(remarks)
    root = logging.getLogger()
    root.addHandler(handler)
    pallas.pallas_call = pallas_call
    try:
        with _one_nan_rerun():
            yield
    finally:
        pallas.pallas_call = original
        root.removeHandler(handler)


class _Rerun(Exception):
    """JAX's de-optimized re-run reached the pallas_call whose output it checks."""


@contextlib.contextmanager
def _one_nan_rerun() -> Iterator[None]:
    """``pallas_call`` executed under ``jax_debug_nans``/``infs`` stops at itself.

    JAX executes a pallas_call (its impl rule) as a ``jit`` of a function that binds
    the same pallas_call again. Under jax_debug_nans/infs, a NaN/Inf in that jit's
    output makes JAX run the function "de-optimized" to find the operation: it binds
    the pallas_call, whose impl is that jit again, which makes the NaN again: a
    recursion (a new jit compiled at each level) to Python's limit, a RecursionError
    after seconds (JAX 0.6.2 to 0.12.0.1, any interpret mode: a kernel that reads
    uninitialised memory, or computes a NaN). Here the re-run's bind of the very
    pallas_call the impl is executing raises at once, and the impl raises what JAX
    raises for an operation executed on its own (``dispatch.apply_primitive``):
    ``FloatingPointError("invalid value (nan) encountered in pallas_call")``, from the
    caller's frames (the line of the pallas_call in the pipeline). Put back when the run
    ends (a kept process compares attributes by identity)."""
    try:
        from jax._src.pallas.pallas_call import pallas_call_p
    except ImportError:
        yield
        return
    original = pallas_call_p.impl
    running = threading.local()

    def impl(*args: Any, **params: Any) -> Any:
        kernels: list[Any] = running.__dict__.setdefault("kernels", [])
        kernel = params.get("jaxpr")
        if any(k is kernel for k in kernels):
            raise _Rerun()
        kernels.append(kernel)
        try:
            return original(*args, **params)
        except _Rerun as rerun:
            # raised in JAX's handler of the InternalFloatingPointError that names the
            # invalid value's kind ("nan" or "inf")
            kind = getattr(rerun.__context__, "ty", None)
            what = f"invalid value ({kind})" if kind else "invalid value"
            raise FloatingPointError(f"{what} encountered in pallas_call") from None
        finally:
            kernels.pop()

    pallas_call_p.def_impl(impl)
    try:
        yield
    finally:
        pallas_call_p.def_impl(original)
