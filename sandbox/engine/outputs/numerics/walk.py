"""What the shadow needs to know of a jaxpr's equations, across JAX versions: the
jaxpr a call holds, a jaxpr's constants, its literals, an equation's line, phase and
bind (the same readings trace_values makes; outputs do not import each other)."""

from __future__ import annotations

import contextlib
from typing import Any

from sandbox.engine.core.sources import snippet_line

#: the parameter holding the jaxpr of each primitive evaluated like a call (its
#: equations are the rows; the call itself has none)
CALL_JAXPR_PARAMS = {
    "pjit": "jaxpr",
    "jit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "remat2": "jaxpr",
    "checkpoint": "jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
    "custom_vjp_call_jaxpr": "fun_jaxpr",
}


def call_jaxpr(eqn: Any) -> Any:
    param = CALL_JAXPR_PARAMS.get(eqn.primitive.name)
    return eqn.params.get(param) if param is not None else None


def parts(jaxpr: Any) -> tuple[Any, list[Any]]:
    """A jaxpr and its constants (a ClosedJaxpr's, a 0.12 Jaxpr's own, or none)."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    return inner, list(getattr(jaxpr, "consts", None) or ())


def _literal_type() -> Any:
    import jax

    try:
        from jax._src.core import Literal

        return Literal
    except ImportError:  # pragma: no cover - older JAX
        return jax.core.Literal  # type: ignore[attr-defined]


LITERAL: Any = _literal_type()


def line(eqn: Any) -> int | None:
    info = eqn.source_info
    try:
        return snippet_line(info.traceback)
    except AttributeError:  # JAX before 0.7: frames of the SourceInfo
        from jax._src import source_info_util

        from sandbox.protocol.requests import SNIPPET_FILENAME

        for frame in source_info_util.user_frames(info):
            if frame.file_name == SNIPPET_FILENAME:
                return int(frame.start_line)
        return None


def phase(name_stack: str) -> str | None:
    if "transpose" in name_stack:
        return "backward"
    if "jvp" in name_stack:
        return "forward"
    return None


def bind(eqn: Any, values: list[Any], params: dict[str, Any] | None = None) -> list[Any]:
    """``eqn``'s primitive bound on ``values`` (with ``params`` in place of its own)."""
    import jax.numpy as jnp
    import numpy as np

    # a primitive's rule may use what only a JAX array has (``.at``): the host's
    # values (literals, a scan's slices) go in as JAX arrays of the same dtype
    values = [jnp.asarray(v) if isinstance(v, np.ndarray | np.generic) else v for v in values]
    raw = eqn.primitive.get_bind_params(eqn.params if params is None else params)
    if isinstance(raw, tuple):  # JAX before 0.5: (subfuns, params)
        subfuns, raw = raw
        values = [*subfuns, *values]
    ctx = getattr(getattr(eqn, "ctx", None), "manager", None)
    with ctx if ctx is not None else contextlib.nullcontext():
        out = eqn.primitive.bind(*values, **raw)
    return list(out) if eqn.primitive.multiple_results else [out]


def scan_split(params: dict[str, Any], inputs: list[Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """A scan's operands as (constants, initial carry, scanned-over)."""
    if "ft_in" in params:
        consts, carry, xs = params["ft_in"].update(inputs).unpack()
        return list(consts), list(carry), list(xs)
    nc, nk = int(params["num_consts"]), int(params["num_carry"])
    return inputs[:nc], inputs[nc : nc + nk], inputs[nc + nk :]


def scan_out_split(
    params: dict[str, Any], outs: list[Any], carried: int
) -> tuple[list[Any], list[Any]]:
    if "ft_out" in params:
        carry, ys = params["ft_out"].update(outs).unpack()
        return list(carry), list(ys)
    return outs[:carried], outs[carried:]
