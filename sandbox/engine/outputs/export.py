"""The ``export`` output: what ``jax.export`` makes of the pipeline, and whether the
artifact works.

The pipeline (under a plain jit when its outermost step is not one) is exported with
``jax.export.export(..., platforms=export_platforms)`` on the request's
``export_shapes`` (one symbolic shape per argument, JAX's syntax, through
``jax.export.symbolic_args_specs``). The event carries the in and out avals as JAX
prints them, the platforms, the calling convention, the StableHLO, and the serialized
artifact (base64). The round trip deserializes the artifact in a fresh Python process
of the same jail and calls it on the request's arguments and on arrays of ones whose
sizes fit the symbolic shapes differently; each result is compared with the pipeline
called in the run's process. A symbolic-shape error (a shape string JAX cannot
parse, or code that compares a symbolic dimension inconclusively) is the user's:
an ``error`` event at their line with JAX's message.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
from typing import Any

from sandbox.engine.core.errors import UserError
from sandbox.engine.core.output import Output, Results
from sandbox.protocol.limits import (
    MAX_EXPORT_ARTIFACT_BYTES,
    MAX_EXPORT_CALLS,
    MAX_MESSAGE_CHARS,
    MAX_TEXT_CHARS,
)

#: how long the fresh process may take to import JAX, deserialize and call
ROUNDTRIP_TIMEOUT_S = 120.0
#: jax.default_backend()'s name of a platform as ``platforms=`` spells it
_PLATFORM = {"gpu": "cuda"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: The fresh process: the artifact and the calls' arguments (npy, base64) on stdin,
#: each call's outputs (npy, base64) or its error on stdout.
CHILD = r"""
import base64, io, json, sys
import numpy as np
import jax
from jax import export

message = json.load(sys.stdin)
exported = export.deserialize(bytearray(base64.b64decode(message["artifact"])))
answers = []
for call in message["calls"]:
    flat = [np.load(io.BytesIO(base64.b64decode(a)), allow_pickle=False) for a in call]
    args, kwargs = jax.tree_util.tree_unflatten(exported.in_tree, flat)
    try:
        leaves = jax.tree_util.tree_leaves(exported.call(*args, **kwargs))
    except Exception as exc:
        answers.append({"error": f"{type(exc).__name__}: {exc}"})
        continue
    outs = []
    for leaf in leaves:
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(leaf), allow_pickle=False)
        outs.append(base64.b64encode(buffer.getvalue()).decode())
    answers.append({"outputs": outs})
json.dump(answers, sys.stdout)
"""


def _aval(aval: Any) -> str:
    return str(aval.str_short() if hasattr(aval, "str_short") else aval)


def _npy(value: Any) -> str:
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.asarray(value), allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode()


def _array(text: str) -> Any:
    import numpy as np

    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False)


def as_arrays(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A Python number as the array JAX makes of it (it has a shape and a dtype)."""
    import jax
    import jax.numpy as jnp

    return tuple(
        jax.tree_util.tree_map(lambda a: a if hasattr(a, "shape") else jnp.asarray(a), args)
    )


def argument_specs(args: tuple[Any, ...], shapes: list[str | None] | None) -> tuple[Any, ...]:
    """The arguments as ShapeDtypeStructs, symbolic where ``shapes`` says."""
    import jax
    from jax import export

    if shapes is None:
        return tuple(jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), args))
    if len(shapes) != len(args):
        raise UserError(
            "trace",
            ValueError(
                f"export_shapes gives {len(shapes)} shape(s) for {len(args)} argument(s): "
                "one per argument (null: the argument's own shape)"
            ),
        )
    try:
        return tuple(export.symbolic_args_specs(args, list(shapes)))
    except Exception as exc:  # JAX's parse error of a shape string
        raise UserError("trace", exc) from exc


def fitted_bindings(args: tuple[Any, ...], shapes: list[str | None]) -> dict[str, int]:
    """Other sizes for the symbolic dimensions: each named dimension's size in the
    arguments, plus one (2 where no argument gives it)."""
    import jax

    bound: dict[str, int] = {}
    for arg, shape in zip(args, shapes, strict=True):
        if shape is None:
            continue
        leaves = jax.tree_util.tree_leaves(arg)
        dims = [d.strip() for d in shape.split(",") if d.strip()]
        for leaf in leaves[:1]:
            for dim, size in zip(dims, getattr(leaf, "shape", ()), strict=False):
                if _NAME.match(dim):
                    bound.setdefault(dim, int(size) + 1)
        for dim in dims:
            for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", dim):
                bound.setdefault(name, 2)
    return bound


def _fitted_args(specs: tuple[Any, ...], shapes: list[str | None], bound: dict[str, int]) -> Any:
    """Arrays of ones of each spec's dtype, its symbolic dimensions at ``bound``."""
    import jax
    import numpy as np

    def concrete(spec: Any, shape: str | None) -> Any:
        if shape is None:
            return np.ones(spec.shape, spec.dtype)
        dims = [d.strip() for d in shape.split(",") if d.strip()]
        sizes = [int(eval(d, {"__builtins__": {}}, dict(bound))) for d in dims]
        return np.ones(sizes, spec.dtype)

    return tuple(
        jax.tree_util.tree_map(lambda s, shape=shape: concrete(s, shape), spec)
        for spec, shape in zip(specs, shapes, strict=True)
    )


def roundtrip(artifact: bytes, calls: list[list[Any]]) -> list[dict[str, Any]]:
    """The artifact deserialized and called in a fresh process of this jail."""
    import jax

    env = dict(os.environ)
    env["JAX_PLATFORMS"] = jax.default_backend()
    if jax.config.values.get("jax_enable_x64"):
        env["JAX_ENABLE_X64"] = "1"
    message = {
        "artifact": base64.b64encode(artifact).decode(),
        "calls": [[_npy(a) for a in call] for call in calls],
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=json.dumps(message).encode(),
        capture_output=True,
        timeout=ROUNDTRIP_TIMEOUT_S,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"the fresh process failed ({done.returncode}): {done.stderr.decode()[-800:]}"
        )
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    return answers


def compared(
    source: str, inputs: list[Any], expected: Any, answer: dict[str, Any]
) -> dict[str, Any]:
    import jax
    import numpy as np

    call: dict[str, Any] = {
        "source": source,
        "inputs": [f"{np.asarray(a).dtype}{list(np.shape(a))}".replace(" ", "") for a in inputs],
        "outputs": [],
        "equal": None,
        "max_abs_diff": None,
        "error": None,
    }
    if "error" in answer:
        call["error"] = str(answer["error"])[:MAX_MESSAGE_CHARS]
        return call
    got = [_array(text) for text in answer["outputs"]]
    want = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(expected)]
    call["outputs"] = [f"{g.dtype}{list(g.shape)}".replace(" ", "") for g in got]
    same_shapes = len(got) == len(want) and all(
        g.shape == w.shape for g, w in zip(got, want, strict=False)
    )
    call["equal"] = same_shapes and all(
        np.array_equal(g, w, equal_nan=g.dtype.kind in "fc") for g, w in zip(got, want, strict=True)
    )
    diffs = [
        float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))
        for g, w in zip(got, want, strict=False)
        if same_shapes and g.size and g.dtype.kind in "fiuc"
    ]
    call["max_abs_diff"] = max(diffs) if diffs else (0.0 if same_shapes else None)
    return call


def make(results: Results) -> dict[str, Any]:
    import jax
    from jax import export

    context = results.pipeline
    run, pipe = context.run, context.pipe
    request = run.request
    own = _PLATFORM.get(jax.default_backend(), jax.default_backend())
    platforms = tuple(request.export_platforms or [own])
    args = as_arrays(pipe.dynamic_args(run.args))
    shapes = request.export_shapes
    specs = argument_specs(args, shapes)
    full = list(run.args)
    dynamic = [i for i in range(len(full)) if i not in pipe.static_argnums]
    for i, spec in zip(dynamic, specs, strict=True):
        full[i] = spec
    try:
        exported = export.export(pipe.lowerable(), platforms=platforms)(*full)
    except Exception as exc:  # a symbolic shape JAX cannot decide on: the user's code
        raise UserError("trace", exc) from exc
    notes: list[str] = []
    stablehlo = exported.mlir_module()
    if len(stablehlo) > MAX_TEXT_CHARS:
        notes.append(
            f"the StableHLO is {len(stablehlo):,} characters; the first {MAX_TEXT_CHARS:,} are shown"
        )
        stablehlo = stablehlo[:MAX_TEXT_CHARS]
    event: dict[str, Any] = {
        "type": "export",
        "function": str(exported.fun_name)[:200],
        "shapes": list(shapes) if shapes is not None else [None] * len(args),
        "in_avals": [_aval(a) for a in exported.in_avals],
        "out_avals": [_aval(a) for a in exported.out_avals],
        "platforms": list(exported.platforms),
        "calling_convention_version": int(exported.calling_convention_version),
        "stablehlo": stablehlo,
        "artifact": None,
        "artifact_bytes": None,
        "roundtrip": [],
        "notes": notes,
    }
    try:
        artifact = bytes(exported.serialize())
    except ImportError as exc:  # flatbuffers missing: say it, never hide it
        notes.append(f"the artifact cannot be serialized in this environment: {exc}")
        return event
    event["artifact_bytes"] = len(artifact)
    if len(artifact) <= MAX_EXPORT_ARTIFACT_BYTES:
        event["artifact"] = base64.b64encode(artifact).decode()
    else:
        notes.append(
            f"the artifact is {len(artifact):,} bytes, over the {MAX_EXPORT_ARTIFACT_BYTES:,} an event carries"
        )
    if run.abstract:
        notes.append("the arguments are shapes and dtypes only: the artifact is not called")
        return event
    if own not in exported.platforms:
        notes.append(
            f"the artifact is for {', '.join(exported.platforms)}: this worker ({own}) cannot call it"
        )
        return event
    calls: list[tuple[str, tuple[Any, ...]]] = [("arguments", tuple(args))]
    if shapes is not None and any(s is not None for s in shapes):
        fitted = _fitted_args(specs, list(shapes), fitted_bindings(args, list(shapes)))
        calls.append(("fitted", fitted))
    calls = calls[:MAX_EXPORT_CALLS]
    flat_calls = [jax.tree_util.tree_leaves(call) for _, call in calls]
    answers = roundtrip(artifact, flat_calls)
    call_fn = pipe.lowerable()
    for (source, call_args), flat, answer in zip(calls, flat_calls, answers, strict=True):
        full_call = list(run.args)
        for i, value in zip(dynamic, call_args, strict=True):
            full_call[i] = value
        expected = jax.block_until_ready(call_fn(*full_call))
        event["roundtrip"].append(compared(source, flat, expected, answer))
    return event


OUTPUT = Output("traced", "exporting the pipeline with jax.export", make=make)
