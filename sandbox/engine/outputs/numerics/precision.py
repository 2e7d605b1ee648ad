"""Precision settings side by side: the pipeline run again under each setting a
request names, each output against the float64 shadow.

* ``default`` / ``high`` / ``highest``: under ``jax.default_matmul_precision``;
* ``float64``: the pipeline traced again with ``jax_enable_x64`` on its arguments in
  float64 (would float64 fix it?);
* ``bfloat16`` / ``float16``: a ``jmp``-style policy (params float32, compute in the
  narrow dtype, outputs float32): the floating arguments cast down, the outputs up;
* ``bfloat16_params`` / ``float16_params``: params stored in the narrow dtype, computed
  in the program's (the floating arguments rounded to it and cast back);
* ``tpu_default``: what a TPU's default precision would do to each float32 matrix
  product, on the CPU: its operands rounded to bfloat16 (``reduce_precision(8, 7)``,
  which XLA keeps) and accumulated in float32; a matrix-vector product is left alone
  (a TPU computes it in full float32). Measured within 1.5e-7–7e-7 relative of a TPU
  v5e's own (shared/notes/numerics.md §2.1). Products inside loops are not rounded.

Each setting compiles the pipeline once (jit).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sandbox.engine.core import jaxpr_walk as walk
from sandbox.engine.outputs.numerics import metrics

LABELS = {
    "default": "default_matmul_precision('default')",
    "high": "default_matmul_precision('high')",
    "highest": "default_matmul_precision('highest')",
    "float64": "float64 (jax_enable_x64)",
    "bfloat16": "compute in bfloat16 (params, outputs float32)",
    "float16": "compute in float16 (params, outputs float32)",
    "bfloat16_params": "params in bfloat16 (compute float32)",
    "float16_params": "params in float16 (compute float32)",
    "tpu_default": "TPU default: bfloat16 operands, float32 sums",
}

#: what each backend's default precision is, in JAX's words (lax.Precision)
BACKEND_DEFAULTS = {
    "tpu": "This TPU's default precision computes a float32 matrix product in one bfloat16 "
    "pass (DEFAULT); 'high' takes 3 passes, 'highest' 6.",
    "gpu": "This GPU's default precision may compute a float32 matrix product in TF32 "
    "(Ampere and later); 'highest' computes it in float32.",
    "cpu": "On the CPU every precision setting computes a float32 product in float32: "
    "'default', 'high' and 'highest' agree here and differ on a TPU or GPU. The TPU's "
    "default is emulated (tpu_default: operands rounded to bfloat16, sums in float32). "
    "Not emulated: a TPU's 'high' (3 bfloat16 passes), and its transcendentals (JAX's "
    "accuracy tables give float32 log up to about 4,000 ulp and tanh about 1,400 ulp on "
    "TPU v2–v5e, where the CPU's are within a few).",
}


def _floats_cast(leaves: list[Any], dtype: Any) -> list[Any]:
    import jax.numpy as jnp

    return [
        jnp.asarray(x).astype(dtype)
        if metrics.inexact(getattr(x, "dtype", np.asarray(x).dtype))
        else x
        for x in leaves
    ]


def _tpu_default_eval(jaxpr: Any, consts: list[Any], args: list[Any]) -> list[Any]:
    """``jaxpr`` bound equation by equation (under a trace), each float32 matrix
    product's operands rounded to bfloat16."""
    from jax import lax

    env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))

    def read(atom: Any) -> Any:
        return (
            np.asarray(atom.val, atom.aval.dtype)
            if isinstance(atom, walk.literal_type())
            else env[atom]
        )

    for eqn in jaxpr.eqns:
        values = [read(v) for v in eqn.invars]
        sub = walk.call_jaxpr(eqn)
        name = eqn.primitive.name
        if sub is not None and not name.startswith("custom_vjp"):
            inner, inner_consts = walk.parts(sub)
            outs = _tpu_default_eval(inner, inner_consts, values)
        else:
            if name in ("dot_general", "conv_general_dilated") and _rounds(eqn):
                values = [lax.reduce_precision(v, exponent_bits=8, mantissa_bits=7) for v in values]
            outs = walk.bind(eqn, values, host_as_jax=True)
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _rounds(eqn: Any) -> bool:
    """A TPU rounds this product's operands: float32 matrices at the default precision."""
    import jax.numpy as jnp

    operands = [v.aval for v in eqn.invars[:2]]
    if any(a.dtype != jnp.float32 or len(a.shape) < 2 for a in operands):
        return False
    precision = eqn.params.get("precision")
    items = precision if isinstance(precision, tuple) else (precision,)
    return all(p is None or str(p).upper().endswith("DEFAULT") for p in items)


#: the settings whose per-line errors are shown: those that keep the program's jaxpr
#: (a dtype policy or float64 traces another). On the CPU the precision levels compute
#: as float32 does, so there only the emulated TPU default is stepped.
LINE_SETTINGS = ("tpu_default", "default", "high", "highest")


def setting_lines(
    setting: str,
    closed: Any,
    leaves: list[Any],
    values: dict[str, tuple[Any, Any, int | None, int]],
) -> list[dict[str, Any]]:
    """Per source line, the largest error (relative, and in ulps) of a value made there
    with the program bound op by op under ``setting``, against the shadow's ``values``
    (rows inside loops are not stepped: a loop is bound whole)."""
    import contextlib

    import jax

    jaxpr, consts = walk.parts(closed)
    worst: dict[int, list[float]] = {}

    def seen(place: str, outs: list[Any]) -> None:
        got = values.get(place)
        if got is None or got[2] is None:
            return
        high, dtype, line, k = got
        errors = metrics.errors(np.asarray(outs[k], np.float64), high, dtype)
        if errors is not None and line is not None:
            top = worst.setdefault(line, [0.0, 0.0])
            top[0], top[1] = max(top[0], errors.max), max(top[1], errors.max_ulp)

    context = (
        jax.default_matmul_precision(setting)
        if setting != "tpu_default"
        else contextlib.nullcontext()
    )
    with context:
        _op_by_op(jaxpr, consts, leaves, "", setting == "tpu_default", seen)
    return [
        {
            "line": line,
            "born_ulp": metrics.measure(ulp),
            "error": metrics.measure(rel),
            "hint": None,
        }
        for line, (rel, ulp) in sorted(worst.items())
    ]


def _op_by_op(
    jaxpr: Any,
    consts: list[Any],
    args: list[Any],
    path: str,
    rounding: bool,
    seen: Callable[[str, list[Any]], None],
) -> list[Any]:
    """``jaxpr`` bound equation by equation (calls stepped into, as the shadow steps
    them), each float32 matrix product's operands rounded to bfloat16 with
    ``rounding``; ``seen`` told each equation's outputs by its place."""
    from jax import lax

    env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))

    def read(atom: Any) -> Any:
        return (
            np.asarray(atom.val, atom.aval.dtype)
            if isinstance(atom, walk.literal_type())
            else env[atom]
        )

    for index, eqn in enumerate(jaxpr.eqns):
        values = [read(v) for v in eqn.invars]
        place = f"{path}{index}"
        sub = walk.call_jaxpr(eqn)
        if sub is not None:
            inner, inner_consts = walk.parts(sub)
            if eqn.primitive.name.startswith("custom_vjp"):
                values = values[len(values) - len(inner.invars) :]
            outs = _op_by_op(inner, inner_consts, values, f"{place}.", rounding, seen)
        else:
            if (
                rounding
                and eqn.primitive.name in ("dot_general", "conv_general_dilated")
                and _rounds(eqn)
            ):
                values = [lax.reduce_precision(v, exponent_bits=8, mantissa_bits=7) for v in values]
            outs = walk.bind(eqn, values, host_as_jax=True)
            seen(place, outs)
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def run_setting(
    setting: str, fn: Callable[..., Any], closed: Any, args: tuple[Any, ...], leaves: list[Any]
) -> list[Any]:
    """The pipeline's output leaves under ``setting`` (``fn`` the pipeline, ``args``
    its arguments, ``leaves`` the dynamic ones as ``closed`` takes them)."""
    import jax

    if setting in ("default", "high", "highest"):
        jaxpr, consts = walk.parts(closed)
        with jax.default_matmul_precision(setting):
            return list(jax.jit(lambda *a: jax.core.eval_jaxpr(jaxpr, consts, *a))(*leaves))
    if setting == "tpu_default":
        jaxpr, consts = walk.parts(closed)
        return list(jax.jit(lambda *a: _tpu_default_eval(jaxpr, consts, list(a)))(*leaves))
    if setting == "float64":
        with jax.enable_x64(True):
            wide = jax.tree_util.tree_map(
                lambda x: np.asarray(x, np.float64) if metrics.inexact(np.asarray(x).dtype) else x,
                args,
            )
            return [np.asarray(x) for x in jax.tree_util.tree_leaves(fn(*wide))]
    import jax.numpy as jnp

    if setting.endswith("_params"):  # stored narrow, computed as the program computes
        stored = setting.removesuffix("_params")
        rounded = jax.tree_util.tree_map(
            lambda x: (
                jnp.asarray(x).astype(stored).astype(jnp.asarray(x).dtype)
                if metrics.inexact(jnp.asarray(x).dtype)
                else x
            ),
            args,
        )
        return list(jax.tree_util.tree_leaves(fn(*rounded)))
    narrow = {"bfloat16": "bfloat16", "float16": "float16"}[setting]

    cast = jax.tree_util.tree_map(
        lambda x: jnp.asarray(x).astype(narrow) if metrics.inexact(jnp.asarray(x).dtype) else x,
        args,
    )
    return [
        jnp.asarray(x).astype(jnp.float32) if metrics.inexact(jnp.asarray(x).dtype) else x
        for x in jax.tree_util.tree_leaves(fn(*cast))
    ]


def settings_event(
    settings: list[str],
    fn: Callable[..., Any],
    closed: Any,
    args: tuple[Any, ...],
    leaves: list[Any],
    shadow_outputs: list[Any],
    dtypes: list[Any],
    values: dict[str, tuple[Any, Any, int | None, int]] | None = None,
) -> list[dict[str, Any]]:
    """Per setting: each output's error against the shadow (measured in ulps of the
    program's own dtype), or what stopped it; for the settings of ``LINE_SETTINGS`` that
    differ on this backend, each line's (``values``: the shadow's, by place)."""
    import jax

    out = []
    for setting in settings:
        entry: dict[str, Any] = {
            "setting": setting,
            "label": LABELS[setting],
            "emulated": setting == "tpu_default",
            "outputs": [],
            "lines": [],
            "error": None,
        }
        try:
            got = run_setting(setting, fn, closed, args, leaves)
            for value, high, dtype in zip(got, shadow_outputs, dtypes, strict=False):
                errors = (
                    metrics.errors(np.asarray(value, np.float64), high, dtype)
                    if metrics.inexact(dtype) and np.shape(value) == np.shape(high)
                    else None
                )
                entry["outputs"].append(errors.as_event() if errors else None)
            stepped = setting == "tpu_default" or (
                setting in LINE_SETTINGS and jax.default_backend() != "cpu"
            )
            if values is not None and stepped:
                entry["lines"] = setting_lines(setting, closed, leaves, values)
        except Exception as exc:  # the pipeline refused the setting (a dtype it cannot take)
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        out.append(entry)
    return out
