"""Walking a jaxpr, across JAX versions: the jaxprs its equations hold (jit's, scan's
and while's bodies, cond's branches, custom rules' functions...), a jaxpr's constants
and literals, an equation's user line, phase and bind, a scan's operands. What every
output that walks a jaxpr reads the same way (trace_values steps it, numerics shadows
it). JAX is imported only by the functions that need it (``literal_type``, ``line``
before 0.7, ``bind``): the rest reads the objects it is given."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from sandbox.engine.core.sources import snippet_line
from sandbox.protocol.requests import SNIPPET_FILENAME

#: The parameter holding the jaxpr of each primitive evaluated like a call (its
#: equations are walked; the call itself computes nothing of its own).
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


def sub_jaxprs(params: dict[str, Any]) -> Iterator[Any]:
    """The jaxprs in one equation's ``params`` (a ClosedJaxpr gives its Jaxpr)."""
    for value in params.values():
        for item in value if isinstance(value, tuple | list) else (value,):
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns") and hasattr(inner, "outvars"):
                yield inner


def call_jaxpr(eqn: Any) -> Any:
    """The jaxpr an equation evaluates like a call (CALL_JAXPR_PARAMS), or None."""
    param = CALL_JAXPR_PARAMS.get(eqn.primitive.name)
    return eqn.params.get(param) if param is not None else None


def parts(jaxpr: Any) -> tuple[Any, list[Any]]:
    """A jaxpr and its constants: a ClosedJaxpr's (JAX before 0.12), or a Jaxpr that
    holds its own (0.12), or an open one (none)."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    return inner, list(getattr(jaxpr, "consts", None) or ())


@functools.cache
def literal_type() -> Any:
    """JAX's Literal (an equation's constant operand)."""
    import jax

    try:
        from jax._src.core import Literal  # 0.12 no longer exports it as jax.core's

        return Literal
    except ImportError:  # pragma: no cover - older JAX
        return jax.core.Literal  # type: ignore[attr-defined]


def line(source_info: Any) -> int | None:
    """The user's line of an equation (its ``source_info``): JAX's ``user_frames`` of
    its traceback (0.7 on), or of its SourceInfo (before)."""
    try:
        return snippet_line(source_info.traceback)
    except AttributeError:
        from jax._src import source_info_util

        for frame in source_info_util.user_frames(source_info):
            if frame.file_name == SNIPPET_FILENAME:
                return int(frame.start_line)
        return None


def phase(name_stack: str) -> str | None:
    """The pass of a differentiation an equation belongs to, by its name stack: JAX
    names the transposed equations ``transpose(...)``, the others of a
    differentiation ``jvp(...)``; None for neither."""
    if "transpose" in name_stack:
        return "backward"
    if "jvp" in name_stack:
        return "forward"
    return None


def bind(
    eqn: Any,
    values: list[Any],
    params: dict[str, Any] | None = None,
    *,
    host_as_jax: bool = False,
) -> list[Any]:
    """``eqn``'s primitive bound on ``values`` (with ``params`` in place of its own).
    ``host_as_jax``: the host's values (numpy: literals, a scan's slices) go in as JAX
    arrays of the same dtype, for a primitive whose rule uses what only a JAX array has
    (``.at``)."""
    if host_as_jax:
        import jax.numpy as jnp
        import numpy as np

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
    """A scan's operands as (constants, initial carry, scanned-over): 0.12 says it in
    ``ft_in``, earlier JAX in ``num_consts`` and ``num_carry``."""
    if "ft_in" in params:
        consts, carry, xs = params["ft_in"].update(inputs).unpack()
        return list(consts), list(carry), list(xs)
    nc, nk = int(params["num_consts"]), int(params["num_carry"])
    return inputs[:nc], inputs[nc : nc + nk], inputs[nc + nk :]


def scan_out_split(
    params: dict[str, Any], outs: list[Any], carried: int
) -> tuple[list[Any], list[Any]]:
    """A scan's outputs as (final carry, stacked ys)."""
    if "ft_out" in params:
        carry, ys = params["ft_out"].update(outs).unpack()
        return list(carry), list(ys)
    return outs[:carried], outs[carried:]
