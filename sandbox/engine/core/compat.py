"""Where JAX versions differ, in one place (sandbox/environments/versions.py lists the offered ones).

Every version runs the same engine; each function here does one thing the way the
running JAX supports it, and says which versions need which way. They are probed
by tests/pool/test_versions_jail.py on every installed version.
"""

from __future__ import annotations

import os
from typing import Any


def set_cpu_device_count(count: int) -> None:
    """Give the CPU backend ``count`` devices. ``jax_num_cpu_devices`` exists from
    0.5; before it, only XLA's flag does it, read when the backend starts (a run's
    backend starts after its config is applied, in its own process)."""
    import jax

    if "jax_num_cpu_devices" in jax.config.values:
        try:
            jax.config.update("jax_num_cpu_devices", count)
        except RuntimeError:
            # 0.5 to 0.7 refuse any update once a backend is up, even to the value it
            # has: a zygote's warm child started its CPU backend with one device, and
            # only runs that want one are given to it. Anything else is a real error.
            if len(jax.devices("cpu")) != count:
                raise
        return
    flag = "--xla_force_host_platform_device_count"
    kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(flag)]
    os.environ["XLA_FLAGS"] = " ".join([*kept, f"{flag}={count}"])


def cost_analysis(compiled: Any) -> dict[str, Any]:
    """XLA's cost figures as one dict: a list of one dict per program before 0.4.36
    (and in some later builds), a dict since, None where XLA has none."""
    cost = compiled.cost_analysis()
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    return dict(cost or {})


def user_frames(entry: Any) -> list[Any]:
    """The user's frames (``file_name``, ``start_line``) of one source-map entry of
    ``Jaxpr.pretty_print(source_map=...)``: a traceback from 0.5 on, which JAX's
    ``user_frames`` filters; in 0.4.x the entry is the user frame itself, and
    ``user_frames`` takes a SourceInfo instead."""
    from jax._src import source_info_util

    if hasattr(entry, "file_name"):
        return [entry]
    return list(source_info_util.user_frames(entry))


def first_line_in(entry: Any, file_name: str) -> int | None:
    """The line of the innermost user frame of ``entry`` (as ``user_frames``) that lies
    in ``file_name``, or None. Only that frame is made into a ``Frame``: making every
    frame of every equation's traceback was most of a 300-layer MLP's jaxpr source map."""
    from jax._src import source_info_util

    raw = getattr(entry, "raw_frames", None)
    to_frame = getattr(source_info_util, "raw_frame_to_frame", None)
    is_user = getattr(source_info_util, "is_user_filename", None)
    if raw is None or to_frame is None or is_user is None or not is_user(file_name):
        return next(
            (int(f.start_line) for f in user_frames(entry) if f.file_name == file_name), None
        )
    codes, lastis = raw()
    for code, lasti in zip(codes, lastis, strict=True):
        if code.co_filename == file_name:
            return int(to_frame(code, lasti).start_line)
    return None


def stablehlo_with_locations(lowered: Any) -> str:
    """The lowered module printed with its MLIR locations: ``as_text(debug_info=True)``
    from 0.5; before, the MLIR module's own printer."""
    try:
        return str(lowered.as_text(debug_info=True))
    except TypeError:  # 0.4.x: as_text(dialect) only
        module = lowered.compiler_ir("stablehlo")
        return str(module.operation.get_asm(enable_debug_info=True))


def out_info(compiled: Any, lowered: Any) -> Any:
    """The outputs' shapes and dtypes (a pytree of ShapeDtypeStruct-likes):
    ``Compiled.out_info`` from 0.7; before, only ``Lowered.out_info`` has them."""
    info = getattr(compiled, "out_info", None)
    return info if info is not None else lowered.out_info


def direct_linearize() -> bool | None:
    """Whether JAX differentiates by direct linearization by default: None where it
    cannot (no ``LinearizeTrace``); ``jax_use_direct_linearize`` says which path
    otherwise (off by default until 0.6, on since; 0.7 on take only that path,
    whatever the flag says)."""
    import jax
    from jax._src.interpreters import ad

    if not hasattr(ad, "LinearizeTrace"):
        return None
    return bool(jax.config.values.get("jax_use_direct_linearize", True))


def using_direct_linearize(on: bool) -> Any:
    """A context in which ``jax.linearize``/``jax.vjp`` take (or not) the direct path,
    where the flag exists (0.4.3x on); elsewhere nothing."""
    import contextlib

    from jax._src import config

    state = getattr(config, "use_direct_linearize", None)
    return state(on) if state is not None else contextlib.nullcontext()


def partial_eval_jaxpr_nounits(
    closed: Any, unknowns: list[bool], instantiate: list[bool]
) -> tuple[Any, Any, list[bool], list[Any]]:
    """JAX's split of a jaxpr into its known and unknown halves (private, the same
    signature from 0.4.x to 0.12): the known one's trailing outputs are the
    residuals, the unknown one's leading inputs."""
    from jax._src.interpreters import partial_eval as pe

    return pe.partial_eval_jaxpr_nounits(closed, unknowns, instantiate)


def eval_jaxpr(jaxpr: Any, consts: Any, *args: Any) -> Any:
    from jax._src import core

    return core.eval_jaxpr(jaxpr, consts, *args)


def config_context(name: str) -> Any:
    """The context manager of the configuration flag ``name`` (``jax.debug_nans`` for
    ``jax_debug_nans``): it sets the flag for the ``with`` block only, in this thread.
    None where this JAX version has no such flag (``jax_debug_key_reuse`` came after
    ``jax_debug_nans``; 0.4.38 on have both)."""
    import jax

    if name not in jax.config.values:
        return None
    return getattr(jax, name.removeprefix("jax_"), None)
