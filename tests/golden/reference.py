"""The golden reference: what JAX itself says for one case, computed directly.

Run it in a fresh process, one per case::

    python tests/golden/reference.py tests/golden/cases/grad_jit.json

or as ``reference.py --serve`` (``serve``), which forks that fresh process per case
from one that has imported JAX and done nothing else.

It prints one JSON object: per pipeline (``"main"``, then ``"0"``, ``"1"``… for the
``compare`` entries) the jaxpr, StableHLO and HLO texts and the value leaves, and
the errors: at most one per pipeline (its first), with the stage, the exception
class and the innermost line of the user's code; an error while executing the
code (stage ``exec``) or evaluating ``args`` (stage ``args``) ends the run.

This file deliberately does not import ``sandbox.engine``: it is a second,
independent implementation of the contract in SPEC §1/§2 (and of the rules spelled
out in ``tests/golden/__init__.py``), written as plainly as possible, so that the
engine is checked against JAX and not against itself. It needs nothing but JAX and
NumPy, and it must run in a process of its own (``config`` and ``devices`` are
applied before JAX's backend starts).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import io
import json
import os
import sys
import traceback
import types
from typing import Any

#: What user code is compiled as (sandbox.protocol.SNIPPET_FILENAME; not imported so
#: that this script stays standalone).
SNIPPET_FILENAME = "snippet.py"
#: Where ``args``, ``tangents`` and ``cotangents`` expressions are compiled: not the
#: user's code, so errors there have no line.
EXPR_FILENAME = "<expression>"
#: The outputs that need the program lowered / compiled.
LOWER_OUTPUTS = ("stablehlo", "hlo", "cost")


class StageError(Exception):
    """The first failure of a run: the stage it happened in and the exception."""

    def __init__(self, stage: str, exc: BaseException, pipeline: str | None) -> None:
        super().__init__(stage)
        self.stage = stage
        self.exc = exc
        self.pipeline = pipeline


def user_line(exc: BaseException) -> int | None:
    """The innermost line of the user's code in the exception's traceback."""
    if isinstance(exc, SyntaxError) and exc.filename == SNIPPET_FILENAME:
        return exc.lineno
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == SNIPPET_FILENAME:
            line = frame.lineno
    return line


def request_of(case: dict[str, Any]) -> dict[str, Any]:
    """The run request of a case file. For readability a case may give ``code`` as a
    list of lines; the request sent to the engine always has it as one string."""
    request = dict(case["request"])
    if isinstance(request.get("code"), list):
        request["code"] = "\n".join(request["code"]) + "\n"
    return request


def tupleize(value: Any) -> Any:
    """JSON arrays in transform options are taken as tuples, recursively."""
    if isinstance(value, list):
        return tuple(tupleize(v) for v in value)
    return value


def as_tuple(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def as_ints(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(value)


def make_jvp_of(g: Any, tangents: tuple[Any, ...]) -> Any:
    import jax

    def jvp_of(*primals: Any) -> Any:
        return jax.jvp(g, primals, tangents)

    return jvp_of


def make_vjp_of(g: Any, cotangents: Any) -> Any:
    import jax

    def vjp_of(*primals: Any) -> Any:
        out, pullback = jax.vjp(g, *primals)
        return out, pullback(cotangents)

    return vjp_of


def pspec(spec: Any) -> Any:
    """A JSON PartitionSpec (lists for several axes; null: replicated)."""
    from jax.sharding import PartitionSpec

    return PartitionSpec(*[tuple(e) if isinstance(e, list) else e for e in spec or ()])


def mesh_context(mesh: Any) -> Any:
    import jax

    return contextlib.nullcontext() if mesh is None else jax.set_mesh(mesh)


def make_reshard_of(g: Any, out: Any) -> Any:
    import jax

    def reshard_of(*args: Any) -> Any:
        return jax.reshard(g(*args), out)

    return reshard_of


def make_linearize_of(g: Any, tangents: tuple[Any, ...]) -> Any:
    import jax

    def linearize_of(*primals: Any) -> Any:
        out, f_jvp = jax.linearize(g, *primals)
        return out, f_jvp(*tangents)

    return linearize_of


def make_transpose_of(g: Any, cotangents: Any) -> Any:
    import jax

    def transpose_of(*primals: Any) -> Any:
        return jax.linear_transpose(g, *primals)(cotangents)

    return transpose_of


COLLECTIVE_OPS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")


def sharding_summary(compiled: Any, hlo: str) -> dict[str, Any]:
    """Each argument's and output's PartitionSpec and blocks (device ids per index
    range), and the kinds of the collectives in the per-device HLO, in order."""
    import jax

    def describe(shardings: Any, avals: list[Any]) -> list[dict[str, Any]]:
        leaves = jax.tree_util.tree_leaves(
            shardings, is_leaf=lambda s: isinstance(s, jax.sharding.Sharding)
        )
        described = []
        for sharding, aval in zip(leaves, avals, strict=True):
            shape = tuple(aval.shape)
            blocks: dict[Any, list[int]] = {}
            for device, index in sharding.devices_indices_map(shape).items():
                key = tuple(slice_range(s, n) for s, n in zip(index, shape, strict=True))
                blocks.setdefault(key, []).append(device.id)
            spec = getattr(sharding, "spec", None)
            described.append(
                {
                    "spec": None
                    if spec is None
                    else [list(e) if isinstance(e, tuple) else e for e in spec],
                    "grid": [
                        {
                            "start": [a for a, _ in k],
                            "stop": [b for _, b in k],
                            "devices": sorted(v),
                        }
                        for k, v in sorted(blocks.items())
                    ],
                }
            )
        return described

    arg_avals = [info._aval for info in jax.tree_util.tree_leaves(compiled.args_info[0])]
    out_avals = jax.tree_util.tree_leaves(compiled.out_info)
    kinds = []
    for line in hlo.splitlines():
        for op in COLLECTIVE_OPS:
            if f" {op}(" in line or f" {op}-start(" in line:
                kinds.append(op)
    return {
        "arguments": describe(compiled.input_shardings[0], arg_avals),
        "outputs": describe(compiled.output_shardings, out_avals),
        "collectives": kinds,
    }


def slice_range(s: slice, size: int) -> tuple[int, int]:
    return (s.start or 0, size if s.stop is None else s.stop)


class Reference:
    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.outputs = request.get("outputs") or [
            "jaxpr",
            "stablehlo",
            "hlo",
            "value",
            "cost",
            "timing",
        ]
        self.result: dict[str, Any] = {"pipelines": {}, "errors": []}
        self.mesh: Any = None

    # --- setup ------------------------------------------------------------------

    def configure(self) -> None:
        import jax

        backend = self.request.get("backend", "auto")
        if backend != "auto":
            jax.config.update("jax_platforms", {"gpu": "cuda"}.get(backend, backend))
        jax.config.update("jax_num_cpu_devices", int(self.request.get("devices", 1)))
        for name, value in (self.request.get("config") or {}).items():
            jax.config.update(name, value)
        # Our own frames (this file) are not the user's: keep them out of the source
        # locations that JAX records in jaxprs and in the HLO's stack frame tables.
        from jax._src import source_info_util

        source_info_util.register_exclusion(os.path.dirname(os.path.abspath(__file__)) + os.sep)

    def exec_code(self) -> None:
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jax import lax

        module = types.ModuleType("snippet")
        module.__file__ = SNIPPET_FILENAME
        module.__dict__.update(jax=jax, jnp=jnp, lax=lax, np=np)
        sys.modules["snippet"] = module
        self.ns = module.__dict__
        try:
            code = compile(self.request["code"], SNIPPET_FILENAME, "exec")
            exec(code, self.ns)
        except Exception as exc:
            raise StageError("exec", exc, None)
        entry = self.request.get("entry", "f")
        try:
            self.mesh = self.make_mesh()
            self.args = as_tuple(self.eval_expr(self.request.get("args", "()")))
            if self.request.get("in_shardings") is not None:
                self.args = tuple(
                    jax.device_put(arg, self.named(spec))
                    for arg, spec in zip(self.args, self.request["in_shardings"], strict=True)
                )
        except Exception as exc:
            raise StageError("args", exc, None)
        try:
            if entry not in self.ns:
                raise NameError(f"name {entry!r} is not defined in the code")
            self.fun = self.ns[entry]
        except Exception as exc:
            raise StageError("exec", exc, None)

    # --- sharding (the request's mesh and PartitionSpecs as JSON lists) ---------------

    def make_mesh(self) -> Any:
        import jax

        mesh = self.request.get("mesh")
        if mesh is None:
            return None
        kwargs = {}
        if mesh.get("axis_types") is not None:
            kwargs["axis_types"] = tuple(
                getattr(jax.sharding.AxisType, t.capitalize()) for t in mesh["axis_types"]
            )
        return jax.make_mesh(tuple(mesh["shape"]), tuple(mesh["axis_names"]), **kwargs)

    def named(self, spec: Any) -> Any:
        from jax.sharding import NamedSharding

        return NamedSharding(self.mesh, pspec(spec))

    def jit_shardings(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.request.get("in_shardings") is not None:
            out["in_shardings"] = tuple(
                None if s is None else self.named(s) for s in self.request["in_shardings"]
            )
        if self.request.get("out_shardings") is not None:
            outs = [None if s is None else self.named(s) for s in self.request["out_shardings"]]
            out["out_shardings"] = outs[0] if len(outs) == 1 else tuple(outs)
        return out

    def eval_expr(self, expr: str) -> Any:
        return eval(compile(expr, EXPR_FILENAME, "eval"), self.ns)

    # --- pipelines --------------------------------------------------------------

    def build(self, transforms: list[dict[str, Any]]) -> tuple[Any, tuple[int, ...], bool]:
        """The pipeline as a callable, its static argument positions, and whether
        it donates arguments."""
        import jax

        fun = self.fun
        static: set[int] = set()
        donates = False
        # the request's shardings go to the last jit, or to a jit added outermost
        shardings = self.jit_shardings()
        jits = [i for i, item in enumerate(transforms) if item["name"] == "jit"]
        for index, item in enumerate(transforms):
            name = item["name"]
            options = {k: tupleize(v) for k, v in item.items() if k != "name"}
            if name == "jit" and jits and index == jits[-1]:
                options.update(shardings)
            if name == "shard_map":
                specs_out = [pspec(s) for s in item["out_specs"]]
                kwargs: dict[str, Any] = {
                    "out_specs": specs_out[0] if len(specs_out) == 1 else tuple(specs_out)
                }
                if "in_specs" in item:
                    kwargs["in_specs"] = tuple(pspec(s) for s in item["in_specs"])
                if item.get("axis_names"):
                    kwargs["axis_names"] = frozenset(item["axis_names"])
                if "check_vma" in item:
                    kwargs["check_vma"] = item["check_vma"]
                fun = jax.shard_map(fun, mesh=self.mesh, **kwargs)
            elif name == "smap":
                options.setdefault("out_axes", 0)
                fun = jax.smap(fun, **options)
            elif name == "reshard":
                outs = [self.named(s) for s in item["out_specs"]]
                fun = make_reshard_of(fun, outs[0] if len(outs) == 1 else tuple(outs))
            elif name == "linearize":
                tangents = as_tuple(self.eval_expr(options["tangents"]))
                fun = make_linearize_of(fun, tangents)
            elif name == "linear_transpose":
                fun = make_transpose_of(fun, self.eval_expr(options["cotangents"]))
            elif name == "checkify":
                from jax.experimental import checkify

                errors = item.get("errors", "user_checks")
                names = [errors] if isinstance(errors, str) else errors
                sets = [getattr(checkify, n) for n in names]
                fun = checkify.checkify(fun, errors=frozenset().union(*sets))
            elif name == "jit":
                static.update(as_ints(options.get("static_argnums")))
                names = options.get("static_argnames") or ()
                if isinstance(names, str):
                    names = (names,)
                if names:
                    params = list(inspect.signature(self.fun).parameters)
                    static.update(params.index(n) for n in names if n in params)
                donates = donates or bool(as_ints(options.get("donate_argnums")))
                fun = jax.jit(fun, **options)
            elif name == "pmap":
                static.update(as_ints(options.get("static_broadcasted_argnums")))
                fun = jax.pmap(fun, **options)
            elif name == "checkpoint":
                policy = options.pop("policy", None)
                if policy is not None:
                    options["policy"] = getattr(jax.checkpoint_policies, policy)
                fun = jax.checkpoint(fun, **options)
            elif name == "jvp":
                # jaxplay names the functions it builds jvp_of / vjp_of (they show in
                # the jaxpr's `name=` and the module's name)
                tangents = self.eval_expr(options["tangents"])
                tangents = tangents if isinstance(tangents, tuple) else (tangents,)
                fun = make_jvp_of(fun, tangents)
            elif name == "vjp":
                fun = make_vjp_of(fun, self.eval_expr(options["cotangents"]))
            else:
                fun = getattr(jax, name)(fun, **options)
        if shardings and not jits:
            fun = jax.jit(fun, static_argnums=tuple(sorted(static)), **shardings)
        return fun, tuple(sorted(static)), donates

    def run_pipeline(self, key: str, transforms: list[dict[str, Any]]) -> None:
        import jax

        out: dict[str, Any] = {}
        self.result["pipelines"][key] = out
        try:
            pipeline, static, donates = self.build(transforms)
        except Exception as exc:
            raise StageError("trace", exc, key)

        if "jaxpr" in self.outputs:
            try:
                closed = jax.make_jaxpr(pipeline, static_argnums=static)(*self.args)
            except Exception as exc:
                raise StageError("trace", exc, key)
            out["jaxpr"] = {"text": str(closed), "sources": jaxpr_sources(closed)}

        if any(o in self.outputs for o in LOWER_OUTPUTS):
            try:
                if not hasattr(pipeline, "lower"):
                    pipeline = jax.jit(pipeline, static_argnums=static)
                platforms = self.request.get("lowering_platforms")
                if platforms:
                    traced = pipeline.trace(*self.args)
                    lowered = traced.lower(lowering_platforms=tuple(platforms))
                else:
                    lowered = pipeline.lower(*self.args)
                text = lowered.as_text()
            except Exception as exc:
                raise StageError("lower", exc, key)
            if "stablehlo" in self.outputs:
                out["stablehlo"] = {"text": text}
            if self.request.get("lowering_platforms"):
                return  # lowered for another platform: nothing compiles here
            if any(o in self.outputs for o in ("hlo", "cost", "sharding")):
                try:
                    compiled = lowered.compile()
                    hlo = compiled.as_text()
                    cost = compiled.cost_analysis()
                except Exception as exc:
                    raise StageError("compile", exc, key)
                if "hlo" in self.outputs:
                    out["hlo"] = {"text": hlo}
                if "sharding" in self.outputs:
                    out["sharding"] = sharding_summary(compiled, hlo)
                if "cost" in self.outputs:
                    if isinstance(cost, list | tuple):
                        cost = cost[0] if cost else {}
                    cost = cost or {}
                    out["cost"] = {
                        "flops": cost.get("flops"),
                        "transcendentals": cost.get("transcendentals"),
                    }

        if "value" in self.outputs and not self.abstract:
            args = self.args
            if donates:
                args = jax.tree_util.tree_map(
                    lambda a: a.copy() if isinstance(a, jax.Array) else a, args
                )
            try:
                value = pipeline(*args)
                value = jax.block_until_ready(value)
                jax.effects_barrier()
            except Exception as exc:
                raise StageError("execute", exc, key)
            out["value"] = {"tree": value_leaves(value)}

    def record(self, err: StageError) -> None:
        message = str(err.exc)
        self.result["errors"].append(
            {
                "stage": err.stage,
                "pipeline": err.pipeline or "main",
                "kind": type(err.exc).__name__,
                "line": user_line(err.exc),
                "message": message.splitlines()[0][:300] if message else "",
            }
        )

    def run(self) -> dict[str, Any]:
        import jax

        stdout = io.StringIO()
        try:
            with contextlib.redirect_stdout(stdout):
                try:
                    self.configure()
                    self.exec_code()
                    self.abstract = any(
                        isinstance(leaf, jax.ShapeDtypeStruct)
                        for leaf in jax.tree_util.tree_leaves(self.args)
                    )
                    pipelines = [("main", self.request.get("transforms") or [])]
                    pipelines += [
                        (str(i), transforms)
                        for i, transforms in enumerate(self.request.get("compare") or [])
                    ]
                    with mesh_context(self.mesh):
                        for key, transforms in pipelines:
                            # A failing pipeline does not stop the others (a compare
                            # entry may fail where the main one works, and vice versa).
                            try:
                                self.run_pipeline(key, transforms)
                            except StageError as err:
                                self.record(err)
                finally:
                    with contextlib.suppress(Exception):
                        jax.effects_barrier()
        except StageError as err:
            self.record(err)
        self.result["stdout"] = sorted({line for line in stdout.getvalue().splitlines() if line})
        return self.result


def snippet_lines(eqn: Any) -> list[int]:
    """The lines of the user's code on an equation's stack, innermost first."""
    from jax._src import source_info_util

    return [
        frame.start_line
        for frame in source_info_util.user_frames(eqn.source_info.traceback)
        if frame.file_name == SNIPPET_FILENAME
    ]


def sub_jaxprs(value: Any) -> list[Any]:
    """The jaxprs inside an equation parameter (cond branches, scan bodies, jit…)."""
    from jax.extend import core

    if isinstance(value, core.ClosedJaxpr):
        return [value.jaxpr]
    if isinstance(value, core.Jaxpr):
        return [value]
    if isinstance(value, tuple | list):
        return [j for v in value for j in sub_jaxprs(v)]
    return []


def jaxpr_sources(closed: Any) -> dict[str, Any]:
    """For each top-level equation, its primitive and the innermost line of the
    user's code that made it; and every user line on the stack of any equation,
    nested ones included (the lines a source map may point at)."""
    top = []
    for i, eqn in enumerate(closed.jaxpr.eqns):
        lines = snippet_lines(eqn)
        top.append({"eqn": i, "primitive": str(eqn.primitive), "line": lines[0] if lines else None})
    every: set[int] = set()
    todo = [closed.jaxpr]
    while todo:
        jaxpr = todo.pop()
        for eqn in jaxpr.eqns:
            every.update(snippet_lines(eqn))
            for param in eqn.params.values():
                todo.extend(sub_jaxprs(param))
    return {"eqns": top, "all_lines": sorted(every)}


def value_leaves(value: Any) -> list[dict[str, Any]]:
    import jax
    import numpy as np

    leaves = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(value)[0]:
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            data = np.asarray(jax.random.key_data(leaf))
            shape, dtype_name = tuple(leaf.shape), str(dtype)
        else:
            data = np.asarray(leaf)
            shape, dtype_name = data.shape, str(data.dtype)
        leaves.append(
            {
                "path": jax.tree_util.keystr(path),
                "shape": list(shape),
                "dtype": dtype_name,
                "sha256": hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest(),
            }
        )
    return leaves


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python tests/golden/reference.py CASE.json", file=sys.stderr)
        return 2
    with open(argv[1]) as fh:
        case = json.load(fh)
    result = Reference(request_of(case)).run()

    import jax
    import jaxlib

    result["jax_version"] = jax.__version__
    result["jaxlib_version"] = jaxlib.__version__
    json.dump(result, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


def serve() -> int:
    """``reference.py --serve``: each case in a process of its own, without an import
    of JAX apiece (~1 CPU-s of each case's 1.2). JAX and NumPy are imported here once,
    with no backend started and no config changed, and each case (a path per line on
    stdin) runs in a child forked from that state: what a new process that imported
    JAX would be. Each answer is one JSON line on stdout: the child's exit status, its
    stdout and its stderr."""
    import tempfile

    import jax
    import jax.numpy
    import numpy

    del jax, numpy  # imported for the children: what each case's process imports first
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the case's process: its stdout and stderr are the files
                code = 1
                try:
                    os.dup2(out.fileno(), 1)
                    os.dup2(err.fileno(), 2)
                    code = main([sys.argv[0], path])
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            answer = {"exit": os.waitstatus_to_exitcode(status)}
            for name, fh in (("stdout", out), ("stderr", err)):
                fh.seek(0)
                answer[name] = fh.read().decode(errors="replace")
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1:] == ["--serve"] else main(sys.argv))
