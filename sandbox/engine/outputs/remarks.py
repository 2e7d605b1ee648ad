"""The ``remarks`` output: what the run noticed at the user's lines (core/remarks.py
collects them), shown once the pipelines are done.

Its hooks: warnings are caught over the whole run; JAX's cache-miss explanations
are on while the snippet's top-level code runs (only there: the engine's own
compiles of each pipeline would be first-time misses of its own making); a
pipeline with a ``checkpoint`` step says what the pipeline up to its (last)
checkpoint step saves for the backward pass; a compile whose partitioner had to
replicate a whole value to reshard it (XLA's involuntary full rematerialization, read
from its log by core/rematerializations.py) says so at the line of that operation.
"""

from __future__ import annotations

import contextlib

from sandbox.engine.core import pipeline as pipelines
from sandbox.engine.core.output import Output, PipelineContext, Results, RunHandle, RunHooks
from sandbox.engine.core.remarks import Remarks
from sandbox.engine.core.rematerializations import HEAD, rematerializations


class RemarksHooks(RunHooks):
    def __init__(self, run: RunHandle) -> None:
        super().__init__(run)
        self.remarks = run.remarks = Remarks()

    def around_run(self) -> contextlib.AbstractContextManager[None]:
        return self.remarks.catching_warnings()

    def around_exec(self) -> contextlib.AbstractContextManager[None]:
        return self.remarks.explaining_cache_misses()

    def after_build(self, pipeline: PipelineContext) -> None:
        names = [t.name for t in pipeline.transforms]
        if "checkpoint" not in names:
            return
        upto = len(names) - names[::-1].index("checkpoint")
        run = pipeline.run
        part = self.run.staged(
            "transform",
            lambda: pipelines.build(
                run.entry, run.request.entry, pipeline.transforms[:upto], run.namespace, run.mesh
            ),
            report=False,
        )
        self.remarks.residuals(part.fn, run.args, part.label)

    def after_pipeline(self, results: Results) -> None:
        # the log is searched first: the compiled text is only made when XLA warned
        if results.compiled is None or not HEAD.search(results.compile_log):
            return
        label = results.pipeline.name
        for remat in rematerializations(results.compile_log, results.compiled.as_text()):
            what = remat["op_name"] or "a value"
            self.remarks.add(
                "rematerialization",
                remat["line"],
                f"{label}: XLA cannot reshard {what} from {remat['from_sharding']} to "
                f"{remat['to_sharding']} efficiently: it replicates the whole value on every "
                "device and slices it again (an involuntary full rematerialization)",
            )

    def report(self) -> None:
        self.run.render(OUTPUT.what, self.remarks.event)


OUTPUT = Output("run", "collecting JAX's remarks", hooks=RemarksHooks)
