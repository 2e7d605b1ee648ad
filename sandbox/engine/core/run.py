"""One run, start to finish, inside a worker process: a worker message in, its
events out (``run_message``). ``Run`` takes the request through its stages (config,
exec, args, then each pipeline's trace, lower, compile, execute); what each output
shows is made by its row (core/output.py), found by name (core/registry.py): after
the stage its row needs, or by its hooks around and after the pipelines.
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
from typing import Any, TypeVar

from sandbox.engine.core import persistent_cache, registry
from sandbox.engine.core.compat import set_cpu_device_count
from sandbox.engine.core.emitter import CapturedStream, Emitter
from sandbox.engine.core.errors import UserError
from sandbox.engine.core.mesh import mesh_context
from sandbox.engine.core.output import Made, Needs, PipelineContext, Results, RunContext
from sandbox.engine.core.registry import made_at
from sandbox.engine.core.remarks import Remarks
from sandbox.protocol.events import DoneStatus, done_event
from sandbox.protocol.requests import SNIPPET_FILENAME, RunRequest, Transform

T = TypeVar("T")
PLATFORMS = {"cpu": "cpu", "gpu": "cuda", "tpu": "tpu"}
#: The run's token (worker message ``token``) that tags each event line (emitter.py)
_TOKEN = re.compile(r"^[0-9a-f]{16,64}$")


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
        # after the request's config: the precision this run's matmuls use
        "matmul_precision": str(jax.config.jax_default_matmul_precision or "default"),
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


class Run:
    def __init__(self, request: RunRequest, run_id: str, emitter: Emitter) -> None:
        self.request, self.run_id, self.emitter = request, run_id, emitter
        self.started_cpu = time.process_time()
        self.errors = 0
        self.entry_line: int | None = None
        #: the request's mesh, built with the arguments (core/mesh.py)
        self.mesh: Any = None
        #: where the run's remarks go (core/remarks.py) when an output collects them
        #: (its hooks set it); else None
        self.remarks: Remarks | None = None
        #: the outputs asked for, in the table's order (core/registry.py)
        self.outputs = registry.rows(request.outputs)
        #: the parts in the whole run of those that have one (core/output.py)
        self.hooks = [o.hooks(self) for _, o in self.outputs if o.hooks is not None]

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

    def render(self, what: str, fn: Callable[[], Made]) -> None:
        """Build and emit a view (an IR text over one event's bound is several events:
        core/text_parts.py); a failure here is jaxplay's, not the user's, unless it is
        a ``UserError`` (an error event at the user's line)."""
        from sandbox.engine.core.errors import engine_error_event

        try:
            made = fn()
        except UserError as error:  # the user's code, met while making it (export's shapes)
            self.fail(error)
            return
        except Exception as exc:
            self.errors += 1
            made = engine_error_event(what, exc)
        for event in made if isinstance(made, list) else [made]:
            self.emit(event)

    def jit_shardings(self) -> dict[str, Any]:
        from sandbox.engine.core.mesh import jit_shardings

        return jit_shardings(self.request, self.mesh) if self.mesh is not None else {}

    def lower(self, pipe: Any, args: tuple[Any, ...]) -> Any:
        from sandbox.engine.core.mesh import lower_for

        platforms = self.request.lowering_platforms
        if platforms:
            return lower_for(pipe.lowerable(), args, list(platforms))
        return pipe.lowerable().lower(*args)

    def make(self, results: Results, needs: Needs) -> None:
        """Emit each requested output that is made once ``needs`` is done."""
        for _, output in made_at(self.outputs, needs):
            if output.make is not None:
                self.render(output.what, functools.partial(output.make, results))

    def fail(self, error: UserError) -> None:
        from sandbox.engine.core.errors import error_event

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
        from sandbox.engine.core.pallas import interpreting

        with contextlib.ExitStack() as stack:
            for hooks in self.hooks:
                stack.enter_context(hooks.around_run())
            # a pallas_call runs in interpret mode on a CPU run, for this run only (pallas.py)
            stack.enter_context(interpreting(self.request, self.remarks))
            return self._execute()

    def report(self) -> None:
        """The outputs' ``report`` hooks: the pipelines are done, or the run stopped."""
        for hooks in self.hooks:
            self.emitter.pipeline = "main"
            hooks.report()

    def _execute(self) -> DoneStatus:
        from sandbox.engine.core import program, shared_eager

        request = self.request
        try:
            self.staged("config", lambda: apply_config(request), report=False)
            self.emit({"type": "accepted", "run_id": self.run_id, "worker": worker_info(request)})
            with contextlib.ExitStack() as stack:
                for hooks in self.hooks:
                    stack.enter_context(hooks.around_exec())
                # the set-up's eager misses are recorded for the template's compiler
                stack.enter_context(shared_eager.sharing())
                module = self.staged("exec", lambda: program.execute_module(request.code))
            namespace = module.__dict__
            with shared_eager.sharing():
                args = self.staged("args", lambda: self.arguments(namespace))
            shared_eager.report()  # what the set-up compiled and missed, for its zygote
            f = self.staged(
                "exec", lambda: program.resolve_entry(module, request.entry), report=False
            )
        except UserError as error:
            shared_eager.report()  # a set-up that failed may have compiled some first
            self.fail(error)
            self.report()
            return "error"
        code = getattr(f, "__code__", None)
        if code is not None and code.co_filename == SNIPPET_FILENAME:
            self.entry_line = code.co_firstlineno
        context = RunContext(request, f, namespace, args, self.mesh, _is_abstract(args))
        with mesh_context(self.mesh):
            for hooks in self.hooks:
                hooks.before_pipelines(context)
            for name, transforms in request.pipelines():
                self.emitter.pipeline = name
                try:
                    self.pipeline(context, name, transforms)
                except UserError as error:
                    self.fail(error)
            self.report()
            self.emitter.pipeline = "main"
            for hooks in self.hooks:
                hooks.finish()
        return "error" if self.errors else "ok"

    def arguments(self, namespace: dict[str, Any]) -> tuple[Any, ...]:
        """The example arguments; with a ``mesh``, it is built first (over the run's
        devices) and the arguments are placed as ``in_shardings`` says."""
        from sandbox.engine.core import mesh, program

        request = self.request
        if request.mesh is not None:
            self.mesh = mesh.build_mesh(request.mesh, request.tpu_topology)
        args = program.evaluate_args(request.args, namespace)
        if request.tpu_topology is not None:  # devices no one has: shapes and dtypes only
            args = mesh.topology_args(args, self.mesh, request.in_shardings)
        elif request.in_shardings is not None:
            args = mesh.place_args(args, self.mesh, request.in_shardings)
        if request.gpu_target is not None:  # a GPU no one has: shapes and dtypes only
            from sandbox.engine.core import gpu_target

            args = gpu_target.abstract_args(args, request.gpu_target)
        return args

    def pipeline(self, context: RunContext, name: str, transforms: list[Transform]) -> None:
        import jax

        from sandbox.engine.core import compile_log, profiler, xla_dump
        from sandbox.engine.core import pipeline as pipelines

        request, args = self.request, context.args
        pipe = self.staged(
            "transform",
            lambda: pipelines.build(
                context.entry,
                request.entry,
                transforms,
                context.namespace,
                self.mesh,
                self.jit_shardings(),
            ),
            report=False,
        )
        pipeline = PipelineContext(context, name, transforms, pipe)
        for hooks in self.hooks:
            hooks.after_build(pipeline)
        results = Results(pipeline)
        if made_at(self.outputs, "traced"):
            results.closed = self.staged(
                "trace", lambda: jax.make_jaxpr(pipe.fn, static_argnums=pipe.static_argnums)(*args)
            )
            self.make(results, "traced")
        compiled = None
        # the outputs of the lowered or compiled program (on shapes and dtypes alone,
        # not those that need concrete arguments)
        compiling = [
            (n, o)
            for n, o in self.outputs
            if o.needs in ("lowered", "compiled") and not (o.concrete and context.abstract)
        ]
        if compiling:
            results.lowered = self.staged("lower", lambda: self.lower(pipe, args))
            self.make(results, "lowered")
            if request.lowering_platforms:
                return  # lowered for hardware this worker does not have: nothing runs
            options = dict(request.compiler_options_for(name))
            parts = {part for _, o in compiling for part in o.dumps}
            with xla_dump.dump_folder(bool(parts)) as dump:
                if dump is not None:
                    options.update(dump.compiler_options(parts))
                lowered = results.lowered
                traced = any(o.traces_compile for _, o in compiling)
                start = time.perf_counter()
                # What the run shows is compiled by the run (persistent_cache.py); a
                # compile whose trace an output reads runs under the profiler (profiler.py)
                # XLA's C++ log lines of the compile (compile_log.py) are kept for outputs
                with (
                    persistent_cache.bypassed(),
                    profiler.tracing(traced) as trace,
                    compile_log.captured() as log,
                ):
                    if options:
                        compiled = self.staged(
                            "compile", lambda: xla_dump.compile_with(lowered, options)
                        )
                    else:
                        compiled = self.staged("compile", lowered.compile)
                results.compile_ms = (time.perf_counter() - start) * 1000
                results.compiled, results.dump, results.compile_trace = compiled, dump, trace
                results.compile_log = log.text
                self.make(results, "compiled")
        if context.abstract:
            return
        # A pipeline that is a jit is run as the executable the run compiled: calling
        # the jit would look its executable up again (or compile it again, when the
        # compile had dump options), and the executable's first call, a good share of
        # a big program's run, would be paid twice (here and by the timing's warm-up).
        # Not with a ``config`` of the request's: the jit's own call does more than the
        # executable's under some (jax_debug_nans re-runs a NaN de-optimised to name
        # the operation that made it).
        run_compiled = (
            compiled is not None and pipe.transforms[-1:] == ["jit"] and not request.config
        )
        if made_at(self.outputs, "executed"):
            call_args = pipelines.copy_args(args) if pipe.donates else args
            if run_compiled and compiled is not None:
                call = functools.partial(compiled, *pipe.dynamic_args(call_args))
            else:
                call = functools.partial(pipe.fn, *call_args)
            results.value = self.staged("execute", lambda: jax.block_until_ready(call()))
            results.executed_compiled = run_compiled and not pipe.donates
            self.make(results, "executed")
        for hooks in self.hooks:
            hooks.after_pipeline(results)


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
    status: DoneStatus
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
        status, reason = "error", "invalid request"
    else:
        status = _execute(request, str(message.get("run_id", "")), emitter)
        reason = "" if status == "ok" else "the code raised an error"
    # the one place the engine makes its ``done`` (the supervisor checks it, never takes it)
    emitter.emit(done_event(status, (time.perf_counter() - started) * 1000, reason))
    return 0


def _execute(request: RunRequest, run_id: str, emitter: Emitter) -> DoneStatus:
    """Run ``request``: ``ok`` or ``error``, and a bug of ours said in the stream as an
    error event, never as a traceback."""
    try:
        return Run(request, run_id, emitter).execute()
    except BaseException as exc:
        from sandbox.engine.core.errors import engine_error_event

        emitter.muted = False
        emitter.emit(engine_error_event("running the request", exc))
        return "error"
