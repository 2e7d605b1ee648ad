"""One run, start to finish, inside a worker process: a worker message in, its
events out (``run_message``). ``Run`` takes the request through its stages (config,
exec, args, then each pipeline's trace, lower, compile, execute, and the timing
comparison); what each output shows is made by its producer (outputs.py).
"""

from __future__ import annotations

import contextlib
import functools
import io
import random
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sandbox.engine import persistent_cache
from sandbox.engine.compat import set_cpu_device_count
from sandbox.engine.emitter import CapturedStream, Emitter
from sandbox.engine.outputs import Results, wanted
from sandbox.engine.sharding import mesh_context
from sandbox.protocol.events import DoneStatus, done_event
from sandbox.protocol.limits import MAX_LABEL_CHARS, MAX_MESSAGE_CHARS
from sandbox.protocol.requests import SNIPPET_FILENAME, RunRequest

T = TypeVar("T")
#: per-row time budget for the timing comparison, and the total across rows
TIMING_ROW_BUDGET_S = 0.4
TIMING_TOTAL_BUDGET_S = 2.0
#: The timing is jaxplay's own work, not the user's: its budget is this share of
#: the CPU time the run took before it (at least TIMING_MIN_BUDGET_S, at most the
#: total above), so that it grows with the program and never dominates a run. CPU
#: time, not wall time: on a loaded machine the wall clock counts other processes'
#: work. A tiny function is called thousands of times even in the least budget.
TIMING_SHARE = 0.1
TIMING_MIN_BUDGET_S = 0.03
PLATFORMS = {"cpu": "cpu", "gpu": "cuda", "tpu": "tpu"}
#: The run's token (worker message ``token``) that tags each event line (emitter.py)
_TOKEN = re.compile(r"^[0-9a-f]{16,64}$")


class UserError(Exception):
    """An exception raised by the user's code (or by JAX on its behalf) in a stage."""

    def __init__(self, stage: str, exc: BaseException) -> None:
        super().__init__(stage)
        self.stage, self.exc = stage, exc


def worker_info(request: RunRequest) -> dict[str, Any]:
    import jax
    import jaxlib

    from sandbox.environments import libraries

    devices = jax.devices()
    return {
        "backend": request.backend if request.backend != "auto" else jax.default_backend(),
        "platform": devices[0].platform,
        "device_kind": devices[0].device_kind,
        "devices": len(devices),
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "libraries": libraries.installed_here(),
    }


def apply_config(request: RunRequest) -> None:
    import jax

    if request.jax_version is not None and request.jax_version != jax.__version__:
        # the pool routes by version; a mismatch is a misrouted run, never run silently
        raise RuntimeError(
            f"this worker runs jax {jax.__version__}, the request asked for {request.jax_version}"
        )
    if request.backend in PLATFORMS:
        jax.config.update("jax_platforms", PLATFORMS[request.backend])
    if request.backend in ("cpu", "auto"):
        set_cpu_device_count(request.devices)
    for name, value in request.config.items():
        jax.config.update(name, value)


@dataclass
class TimingRow:
    pipeline: str
    label: str
    compile_ms: float | None
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    donates: bool = False
    #: the run's ``execute`` stage called ``fn`` on ``args`` already: no warm-up
    warm: bool = False


class Run:
    def __init__(self, request: RunRequest, run_id: str, emitter: Emitter) -> None:
        self.request, self.run_id, self.emitter = request, run_id, emitter
        self.started_cpu = time.process_time()
        self.errors = 0
        self.entry_line: int | None = None
        self.timing_rows: list[TimingRow] = []
        #: the run's remarks, when asked for (sandbox/engine/remarks.py)
        self.remarks: Any = None
        #: the request's mesh, built with the arguments (sandbox/engine/sharding.py)
        self.mesh: Any = None

    def emit(self, event: dict[str, Any]) -> None:
        self.emitter.emit(event)

    def staged(self, stage: str, fn: Callable[[], T], *, report: bool = True) -> T:
        """Run one stage of user-facing work; time it; turn exceptions into UserError.

        ``report=False`` for the steps too small to be worth a ``stage`` event
        (applying config, resolving the entry, building the pipeline)."""
        self.emitter.stage = stage
        start = time.perf_counter()
        try:
            result = fn()
        except (Exception, SystemExit) as exc:
            raise UserError(stage, exc) from exc
        if report:
            self.emit({"type": "stage", "stage": stage, "ms": (time.perf_counter() - start) * 1000})
        return result

    def render(self, what: str, fn: Callable[[], dict[str, Any] | list[dict[str, Any]]]) -> None:
        """Build and emit a view (an IR text over one event's bound is several events:
        sandbox/engine/text_parts.py); a failure here is jaxplay's, not the user's."""
        from sandbox.engine.errors import engine_error_event

        try:
            made = fn()
        except Exception as exc:
            self.errors += 1
            made = engine_error_event(what, exc)
        for event in made if isinstance(made, list) else [made]:
            self.emit(event)

    def jit_shardings(self) -> dict[str, Any]:
        from sandbox.engine.sharding import jit_shardings

        return jit_shardings(self.request, self.mesh) if self.mesh is not None else {}

    def lower(self, pipe: Any, args: tuple[Any, ...]) -> Any:
        from sandbox.engine.sharding import lower_for

        platforms = self.request.lowering_platforms
        if platforms:
            return lower_for(pipe.lowerable(), args, list(platforms))
        return pipe.lowerable().lower(*args)

    def make(self, results: Any, needs: Any) -> None:
        """Emit each requested output that is made once ``needs`` is done."""
        for _, producer in wanted(self.request.outputs, needs):
            assert producer.make is not None
            self.render(producer.what, functools.partial(producer.make, results))

    def fail(self, error: UserError) -> None:
        from sandbox.engine.errors import error_event

        self.errors += 1
        event = error_event(error.stage, error.exc)
        if (
            event["line"] is None
            and self.entry_line is not None
            and error.stage not in ("exec", "args")
        ):
            # JAX raised outside any user frame (e.g. grad of a non-scalar output, checked
            # after f returned): point at the function the pipeline was built from.
            event["line"] = self.entry_line
        self.emit(event)

    def execute(self) -> DoneStatus:
        from sandbox.engine.kernels import interpreting
        from sandbox.engine.remarks import Remarks

        # a pallas_call runs in interpret mode on a CPU run, for this run only (kernels.py)
        if "remarks" not in self.request.outputs:
            with interpreting(self.request, None):
                return self._execute()
        self.remarks = Remarks()
        with self.remarks.catching_warnings(), interpreting(self.request, self.remarks):
            return self._execute()

    def emit_remarks(self) -> None:
        remarks = self.remarks
        if remarks is not None:
            self.emitter.pipeline = "main"
            self.render("collecting JAX's remarks", remarks.event)

    def _execute(self) -> DoneStatus:
        from sandbox.engine import program

        request = self.request
        try:
            self.staged("config", lambda: apply_config(request), report=False)
            self.emit({"type": "accepted", "run_id": self.run_id, "worker": worker_info(request)})
            # the snippet's top-level code runs with JAX's cache-miss explanations
            # on when remarks are asked for (sandbox/engine/remarks.py)
            explaining = (
                self.remarks.explaining_cache_misses() if self.remarks else contextlib.nullcontext()
            )
            with explaining:
                module = self.staged("exec", lambda: program.execute_module(request.code))
            namespace = module.__dict__
            args = self.staged("args", lambda: self.arguments(namespace))
            f = self.staged(
                "exec", lambda: program.resolve_entry(module, request.entry), report=False
            )
        except UserError as error:
            self.fail(error)
            self.emit_remarks()
            return "error"
        code = getattr(f, "__code__", None)
        if code is not None and code.co_filename == SNIPPET_FILENAME:
            self.entry_line = code.co_firstlineno
        abstract = _is_abstract(args)
        with mesh_context(self.mesh):
            for name, transforms in request.pipelines():
                self.emitter.pipeline = name
                try:
                    self.pipeline(f, transforms, namespace, args, abstract)
                except UserError as error:
                    self.fail(error)
            self.emit_remarks()
            self.emitter.pipeline = "main"
            # Timing compares f with the pipelines that compiled; when none did, the
            # errors already said why and an eager row alone would only repeat them.
            if "timing" in request.outputs and not abstract and self.timing_rows:
                self.timing(f, args)
        return "error" if self.errors else "ok"

    def checkpoint_residuals(
        self, f: Any, transforms: list[Any], ns: dict[str, Any], args: tuple[Any, ...]
    ) -> None:
        """What the pipeline up to its (last) checkpoint step saves for the backward pass."""
        from sandbox.engine import pipeline as pipelines

        names = [t.name for t in transforms]
        upto = len(names) - names[::-1].index("checkpoint")
        part = self.staged(
            "transform",
            lambda: pipelines.build(f, self.request.entry, transforms[:upto], ns, self.mesh),
            report=False,
        )
        self.remarks.residuals(part.fn, args, part.label)

    def arguments(self, namespace: dict[str, Any]) -> tuple[Any, ...]:
        """The example arguments; with a ``mesh``, it is built first (over the run's
        devices) and the arguments are placed as ``in_shardings`` says."""
        from sandbox.engine import program, sharding

        request = self.request
        if request.mesh is not None:
            self.mesh = sharding.build_mesh(request.mesh, request.tpu_topology)
        args = program.evaluate_args(request.args, namespace)
        if request.tpu_topology is not None:  # devices no one has: shapes and dtypes only
            args = sharding.topology_args(args, self.mesh, request.in_shardings)
        elif request.in_shardings is not None:
            args = sharding.place_args(args, self.mesh, request.in_shardings)
        if request.gpu_target is not None:  # a GPU no one has: shapes and dtypes only
            from sandbox.engine import gpu_target

            args = gpu_target.abstract_args(args, request.gpu_target)
        return args

    def pipeline(
        self,
        f: Any,
        transforms: list[Any],
        ns: dict[str, Any],
        args: tuple[Any, ...],
        abstract: bool,
    ) -> None:
        import jax

        from sandbox.engine import pipeline as pipelines
        from sandbox.engine import profile, xla_dump

        outputs = self.request.outputs
        pipe = self.staged(
            "transform",
            lambda: pipelines.build(
                f, self.request.entry, transforms, ns, self.mesh, self.jit_shardings()
            ),
            report=False,
        )
        if self.remarks is not None and "checkpoint" in [t.name for t in transforms]:
            self.checkpoint_residuals(f, transforms, ns, args)
        # what outputs that trace the entry again need (sandbox/engine/shapes.py)
        results = Results(extra={"entry": f, "args": args, "pipe": pipe, "transforms": transforms})
        # what autodiff rebuilds the pipeline's steps with (sandbox/engine/autodiff.py)
        results.extra.update(function=f, namespace=ns, mesh=self.mesh, steps=transforms)
        results.extra.update(entry_name=self.request.entry, arguments=args)
        results.extra["pipeline"] = self.emitter.pipeline  # "main", or a compare's index
        results.extra["request"] = self.request  # what the checks run (sandbox/engine/checks.py)
        if wanted(outputs, "traced"):
            results.closed = self.staged(
                "trace", lambda: jax.make_jaxpr(pipe.fn, static_argnums=pipe.static_argnums)(*args)
            )
            self.make(results, "traced")
        compiled = None
        compile_ms: float | None = None
        compiling = wanted(outputs, "lowered") + wanted(outputs, "compiled")
        if compiling or ("timing" in outputs and not abstract):
            results.lowered = self.staged("lower", lambda: self.lower(pipe, args))
            self.make(results, "lowered")
            if self.request.lowering_platforms:
                return  # lowered for hardware this worker does not have: nothing runs
            options = dict(self.request.compiler_options_for(self.emitter.pipeline))
            with xla_dump.dump_folder(any(p.dumps for _, p in compiling)) as dump:
                if dump is not None:
                    # a GPU's compile (this worker's, or one for a gpu_target) dumps PTX
                    gpu = bool(self.request.gpu_target) or jax.default_backend() == "gpu"
                    options.update(
                        dump.compiler_options(
                            passes="passes" in outputs, kernels="asm" in outputs, gpu=gpu
                        )
                    )
                lowered = results.lowered
                start = time.perf_counter()
                # What the run shows is compiled by the run (persistent_cache.py).
                # a compile that makes ``profile`` is traced: its passes' times
                with persistent_cache.bypassed(), profile.tracing("profile" in outputs) as trace:
                    if options:
                        compiled = self.staged(
                            "compile", lambda: xla_dump.compile_with(lowered, options)
                        )
                    else:
                        compiled = self.staged("compile", lowered.compile)
                compile_ms = (time.perf_counter() - start) * 1000
                results.compiled, results.dump = compiled, dump
                results.extra["compile_trace"] = trace
                self.make(results, "compiled")
        if abstract:
            return
        # A pipeline that is a jit is run as the executable the run compiled: calling
        # the jit would look its executable up again (or compile it again, when the
        # compile had dump options), and the executable's first call, a good share of
        # a big program's run, would be paid twice (here and by the timing's warm-up).
        # Not with a ``config`` of the request's: the jit's own call does more than the
        # executable's under some (jax_debug_nans re-runs a NaN de-optimised to name
        # the operation that made it).
        run_compiled = (
            compiled is not None and pipe.transforms[-1:] == ["jit"] and not self.request.config
        )
        executed = False
        if wanted(outputs, "executed"):
            call_args = pipelines.copy_args(args) if pipe.donates else args
            if run_compiled and compiled is not None:
                call = functools.partial(compiled, *pipe.dynamic_args(call_args))
            else:
                call = functools.partial(pipe.fn, *call_args)
            results.value = self.staged("execute", lambda: jax.block_until_ready(call()))
            executed = run_compiled and not pipe.donates
            self.make(results, "executed")
        if compiled is not None:
            name = self.emitter.pipeline
            self.timing_rows.append(
                TimingRow(
                    name,
                    pipe.label,
                    compile_ms,
                    compiled,
                    pipe.dynamic_args(args),
                    pipe.donates,
                    warm=executed,
                )
            )

    def timing(self, f: Any, args: tuple[Any, ...]) -> None:
        from sandbox.engine.pipeline import copy_args
        from sandbox.engine.timing import measure, measure_fresh

        rows = [
            TimingRow("main", f"{self.request.entry} (eager)", None, f, args),
            *self.timing_rows,
        ]
        budget = min(TIMING_ROW_BUDGET_S, timing_budget(self.started_cpu) / len(rows))
        measured, notes = [], []
        started = time.perf_counter()
        # The timing loops call the function hundreds of times: what it prints
        # (jax.debug.print runs on every call) is counted, not relayed.
        self.emitter.muted, self.emitter.muted_lines = True, 0
        for row in rows:
            if row.donates:  # each call consumes its arguments: time it on fresh copies
                fresh = functools.partial(copy_args, row.args)
                timer = functools.partial(measure_fresh, row.fn, fresh, budget)
            else:
                timer = functools.partial(measure, row.fn, row.args, budget, warm=row.warm)
            try:
                stats = self.staged("timing", timer, report=False)
            except UserError as error:
                if row.compile_ms is None:
                    # f itself may not run outside its transformation (a collective
                    # such as lax.psum needs pmap's axis name): a note, not an error.
                    note = f"{row.label} not timed: {type(error.exc).__name__}: {error.exc}"
                    notes.append(note[:MAX_MESSAGE_CHARS])
                else:
                    self.fail(error)
                continue
            measured.append(
                {
                    "label": row.label[:MAX_LABEL_CHARS],
                    "pipeline": row.pipeline,
                    "compile_ms": row.compile_ms,
                    **stats,
                }
            )
        self.emitter.flush_streams()
        self.emitter.muted = False
        self.emit(
            {"type": "stage", "stage": "timing", "ms": (time.perf_counter() - started) * 1000}
        )
        if self.emitter.muted_lines:
            self.emitter.emit_text(
                "stdout",
                f"[{self.emitter.muted_lines} lines printed during the timing runs are not shown]\n",
            )
        self.emit({"type": "timing", "rows": measured, "notes": notes})


def timing_budget(started_cpu: float) -> float:
    """The timing's budget across its rows: TIMING_SHARE of the run's CPU time so
    far, within TIMING_MIN_BUDGET_S and TIMING_TOTAL_BUDGET_S."""
    spent = time.process_time() - started_cpu
    return min(TIMING_TOTAL_BUDGET_S, max(TIMING_MIN_BUDGET_S, TIMING_SHARE * spent))


def _is_abstract(args: tuple[Any, ...]) -> bool:
    import jax

    return any(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in jax.tree_util.tree_leaves(args))


def fresh_randomness() -> None:
    """Seed Python's ``random`` and NumPy's global generator from the OS, as a fresh
    interpreter does: every run's, in a zygote's fork or a kept process alike (a fork
    would otherwise draw what its zygote would have drawn, every time). JAX's explicit
    keys are not touched."""
    random.seed()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()


def run_message(message: dict[str, Any], event_fd: int) -> int:
    """Run one worker message in this process, writing events to ``event_fd``."""
    from pydantic import ValidationError

    started = time.perf_counter()
    fresh_randomness()
    token = message.get("token")
    emitter = Emitter(event_fd, token if isinstance(token, str) and _TOKEN.match(token) else "")
    sys.stdout = CapturedStream(emitter, "stdout")
    sys.stderr = CapturedStream(emitter, "stderr")
    sys.stdin = io.StringIO("")
    try:
        request = RunRequest.model_validate(message.get("request"))
    except ValidationError as exc:
        emitter.emit(
            {
                "type": "error",
                "stage": "request",
                "kind": "ValidationError",
                "message": str(exc),
                "line": None,
                "hint": None,
                "doc_url": None,
            }
        )
        emitter.emit(done_event("error", (time.perf_counter() - started) * 1000, "invalid request"))
        return 0
    try:
        status = Run(request, str(message.get("run_id", "")), emitter).execute()
    except BaseException as exc:  # a bug of ours: say so, in the stream, not as a traceback
        from sandbox.engine.errors import engine_error_event

        emitter.muted = False
        emitter.emit(engine_error_event("running the request", exc))
        status = "error"
    reason = "" if status == "ok" else "the code raised an error"
    emitter.emit(done_event(status, (time.perf_counter() - started) * 1000, reason))
    return 0
