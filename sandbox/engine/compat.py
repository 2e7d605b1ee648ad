"""Where JAX versions differ, in one place (sandbox/versions.py lists the offered ones).

Every version runs the same engine; each function here does one thing the way the
running JAX supports it, and says which versions need which way. They are probed
by tests/sandbox/test_versions_jail.py on every installed version.
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
