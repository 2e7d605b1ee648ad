"""A run request written out as a self-contained Python script that plain JAX runs:
the snippet's code with the engine's pre-imports, the pipeline as the engine builds it
(sandbox/engine/core/pipeline.py's rules, spelled as calls), the example arguments, one call,
and a print of what the run showed (the value's ``repr``, or the exception).

The script imports nothing of jaxplay. What it cannot write out (a mesh and its
sharding steps, deviceless targets) is named in ``Repro.not_written``, and then no
script is made: a repro that silently differs from the run would mislead a maintainer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sandbox.protocol import RunRequest

#: transforms the engine builds as ``jax.NAME(fn, **options)``
PLAIN = frozenset({"jit", "grad", "value_and_grad", "vmap", "pmap", "jacfwd", "jacrev", "hessian"})
#: the engine's pre-imports (sandbox/engine/core/program.py execute_module)
PRELUDE = "import jax\nimport jax.numpy as jnp\nimport jax.lax as lax\nimport numpy as np\n"
#: request fields whose effect the script does not write out, and why
NOT_WRITTEN = {
    "mesh": "a device mesh",
    "in_shardings": "input shardings",
    "out_shardings": "output shardings",
    "gpu_target": "a deviceless GPU target",
    "tpu_topology": "a deviceless TPU topology",
    "lowering_platforms": "lowering for other platforms",
}
MESH_STEPS = frozenset({"shard_map", "smap", "reshard"})

_HELPERS = {
    "jvp": """
def jvp_step(fn, tangents):
    tangents = tangents if isinstance(tangents, tuple) else (tangents,)
    return lambda *primals: jax.jvp(fn, primals, tangents)
""",
    "vjp": """
def vjp_step(fn, cotangents):
    def vjp_of(*primals):
        out, pullback = jax.vjp(fn, *primals)
        return out, pullback(cotangents)
    return vjp_of
""",
    "linearize": """
def linearize_step(fn, tangents):
    tangents = tangents if isinstance(tangents, tuple) else (tangents,)
    def linearize_of(*primals):
        out, f_jvp = jax.linearize(fn, *primals)
        return out, f_jvp(*tangents)
    return linearize_of
""",
    "linear_transpose": """
def linear_transpose_step(fn, cotangents):
    return lambda *primals: jax.linear_transpose(fn, *primals)(cotangents)
""",
}


@dataclass
class Repro:
    script: str | None
    #: what the run had that the script does not reproduce (then ``script`` is None)
    not_written: list[str] = field(default_factory=list)
    #: the pipeline as JAX spells it: ``jit(grad(f))``
    pipeline: str = ""


def _python(value: Any) -> Any:
    """JSON option values as the engine passes them: lists become tuples."""
    return tuple(_python(v) for v in value) if isinstance(value, list) else value


def _kwargs(options: dict[str, Any]) -> str:
    return "".join(f", {name}={_python(value)!r}" for name, value in options.items())


def _step(name: str, options: dict[str, Any], helpers: list[str]) -> str:
    if name in PLAIN:
        return f"fn = jax.{name}(fn{_kwargs(options)})"
    if name == "checkpoint":
        opts = dict(options)
        policy = opts.pop("policy", None)
        extra = f", policy=jax.checkpoint_policies.{policy}" if policy else ""
        return f"fn = jax.checkpoint(fn{_kwargs(opts)}{extra})"
    if name == "checkify":
        errors = options.get("errors", "user_checks")
        names = (errors,) if isinstance(errors, str) else tuple(errors)
        union = " | ".join(f"checkify.{n}" for n in names)
        return f"from jax.experimental import checkify\nfn = checkify.checkify(fn, errors={union})"
    helper = name
    if helper not in helpers:
        helpers.append(helper)
    word = "tangents" if name in ("jvp", "linearize") else "cotangents"
    return f"fn = {name}_step(fn, {options[word]})"


def repro(request: RunRequest) -> Repro:
    """The script, or what stops one being written."""
    missing = [why for name, why in NOT_WRITTEN.items() if getattr(request, name)]
    missing += [f"the {t.name} step" for t in request.transforms if t.name in MESH_STEPS]
    pipeline = request.entry
    for t in request.transforms:
        pipeline = f"{t.name}({pipeline}{_kwargs(dict(t.options))})"
    if missing:
        return Repro(None, missing, pipeline)
    head = ["# A repro written by jaxplay from its run: plain JAX, nothing else."]
    if request.backend in ("cpu", "auto") and request.devices > 1:
        head += [
            "import os",
            f'os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + '
            f'" --xla_force_host_platform_device_count={request.devices}").strip()',
        ]
    lines = [*head, PRELUDE.rstrip("\n")]
    if request.backend in ("cpu", "gpu", "tpu"):
        platform = {"cpu": "cpu", "gpu": "cuda", "tpu": "tpu"}[request.backend]
        lines.append(f'jax.config.update("jax_platforms", "{platform}")')
    for name, value in request.config.items():
        lines.append(f"jax.config.update({name!r}, {value!r})")
    lines += [
        "",
        "# --- the snippet ---",
        request.code.rstrip("\n"),
        "# --- end of the snippet ---",
    ]
    helpers: list[str] = []
    steps = [_step(t.name, dict(t.options), helpers) for t in request.transforms]
    for helper in helpers:
        lines.append(_HELPERS[helper].rstrip("\n"))
    lines += ["", f"fn = {request.entry}", *steps]
    lines += [
        "",
        f"args = {request.args}",
        "args = args if isinstance(args, tuple) else (args,)",
        "try:",
        "    result = jax.block_until_ready(fn(*args))",
        "except Exception as exc:  # what the run showed was this error",
        '    print(f"{type(exc).__name__}: {exc}")',
        "else:",
        "    print(repr(result))",
    ]
    return Repro("\n".join(lines) + "\n", [], pipeline)
