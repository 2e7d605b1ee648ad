"""What an output is to the engine: its row (``Output``), what a pipeline hands it
(``Results``, with the pipeline's typed ``PipelineContext``) and, for an output of
the whole run, its hooks (``RunHooks``).

Each output is one module of ``sandbox/engine/outputs/`` named as its row of
``sandbox.protocol.OUTPUT_TABLE``, holding its row as ``OUTPUT``; the run finds it by
that name (registry.py) and never names one itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from sandbox.engine.core.compile_trace import Trace
    from sandbox.engine.core.emitter import Emitter
    from sandbox.engine.core.errors import UserError
    from sandbox.engine.core.pipeline import Pipeline
    from sandbox.engine.core.remarks import Remarks
    from sandbox.engine.core.xla_dump import Dump, DumpPart
    from sandbox.protocol.requests import RunRequest, Transform

#: the stage of a pipeline after which an output is made: its jaxpr traced, its
#: program lowered or compiled, its value computed; ``run``: made by its hooks alone
Needs = Literal["traced", "lowered", "compiled", "executed", "run"]
#: what making an output gives: its event, or (an IR text over one event's bound,
#: core/text_parts.py) its events in order
Made = dict[str, Any] | list[dict[str, Any]]
T = TypeVar("T")


@dataclass(frozen=True)
class RunContext:
    """What every pipeline of one run shares: the request, the user's entry function
    and the module namespace it was defined in, the example arguments and the mesh
    they were placed on (None without one)."""

    request: RunRequest
    entry: Callable[..., Any]
    namespace: dict[str, Any]
    args: tuple[Any, ...]
    mesh: Any
    #: the arguments are shapes and dtypes only (ShapeDtypeStruct): nothing runs
    abstract: bool


@dataclass(frozen=True)
class PipelineContext:
    """One pipeline of the run: its name (``main``, or a compare's index), its steps
    as the request gives them, and the pipeline built from them."""

    run: RunContext
    name: str
    transforms: list[Transform]
    pipe: Pipeline


@dataclass
class Results:
    """What one pipeline has made so far."""

    pipeline: PipelineContext
    closed: Any = None
    lowered: Any = None
    compiled: Any = None
    #: the compile's wall time (ms), when this run compiled
    compile_ms: float | None = None
    value: Any = None
    #: the execute stage called ``compiled`` on the arguments as they are (so a later
    #: call of it needs no warm-up)
    executed_compiled: bool = False
    #: XLA's dump folder of this compile (core/xla_dump.py), when an output asked for one
    dump: Dump | None = None
    #: the profiler's trace of this compile (core/compile_trace.py), when asked for
    compile_trace: Trace | None = None
    #: what XLA's C++ logs wrote to standard error while this run compiled it
    #: (core/compile_log.py: the partitioner's involuntary rematerializations)
    compile_log: str = ""
    #: the compiled module's HLO text, printed once for every output that reads it
    _hlo_text: str | None = None

    def hlo_text(self) -> str:
        """``compiled.as_text()``, printed on the first call (a 1,000-layer MLP's is
        4.7 M characters)."""
        if self._hlo_text is None:
            self._hlo_text = self.compiled.as_text()
        return self._hlo_text


class RunHandle(Protocol):
    """What an output's hooks may use of the run (core/run.py's ``Run``)."""

    request: RunRequest
    emitter: Emitter
    #: the process's CPU time when the run started
    started_cpu: float
    #: where the run's remarks go, when an output collects them (it sets this)
    remarks: Remarks | None

    def emit(self, event: dict[str, Any]) -> None: ...

    def staged(self, stage: str, fn: Callable[[], T], *, report: bool = True) -> T:
        """``fn()`` as a stage of the user's work: its exception is a UserError."""
        ...

    def render(self, what: str, fn: Callable[[], Made]) -> None:
        """Emit what ``fn`` makes; its failure is jaxplay's, said as ``what``."""
        ...

    def fail(self, error: UserError) -> None: ...


class RunHooks:
    """An output's part in the whole run rather than in one pipeline: made once per
    run that asks for the output, from the run itself (its request, emitter and
    stages); the run calls each hook of each such output in the table's order."""

    def __init__(self, run: RunHandle) -> None:
        self.run = run

    def around_run(self) -> contextlib.AbstractContextManager[None]:
        """Held over the whole run, from the config on."""
        return contextlib.nullcontext()

    def around_exec(self) -> contextlib.AbstractContextManager[None]:
        """Held while the snippet's top-level code runs."""
        return contextlib.nullcontext()

    def before_pipelines(self, context: RunContext) -> None:
        """Once the module ran and its arguments are built, before any pipeline."""

    def after_build(self, pipeline: PipelineContext) -> None:
        """After each pipeline is built; a UserError raised here fails the pipeline."""

    def after_pipeline(self, results: Results) -> None:
        """After each pipeline that ran to its end on concrete arguments."""

    def report(self) -> None:
        """Once the pipelines are done, or the run stopped before them."""

    def finish(self) -> None:
        """Last, after every pipeline ran and every ``report``."""


@dataclass(frozen=True)
class Output:
    """One output's row: what it needs and what making it is doing."""

    #: the stage of each pipeline after which it is made (``run``: by its hooks)
    needs: Needs
    #: what making it is doing, said when that fails (the failure is jaxplay's)
    what: str
    #: its event from a pipeline's results (None: made by its hooks)
    make: Callable[[Results], Made] | None = None
    #: what it reads of XLA's dump of the compile (core/xla_dump.py)
    dumps: tuple[DumpPart, ...] = ()
    #: it reads the profiler's trace of the compile (core/compile_trace.py)
    traces_compile: bool = False
    #: it needs concrete arguments (on shapes and dtypes alone it is not made)
    concrete: bool = False
    #: its part in the whole run (made once per run that asks for it)
    hooks: type[RunHooks] | None = None
    #: what a zygote does for it before forking (imports a run of it would pay)
    prepare: Callable[[], None] | None = None
