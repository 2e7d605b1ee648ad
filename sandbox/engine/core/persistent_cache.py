"""JAX's persistent compilation cache, for what a run compiles but never shows.

Every run is a fresh fork whose in-memory XLA caches are empty, so each eager
operation (building the args, a pipeline without ``jit``, op by op) compiles again.
With the cache on, a tenant's later runs load those executables from the tenant's
own cache directory (sandbox/jail/compile_cache.py says where and who may write it)
instead of compiling them.

What a run *shows* never comes from the cache: the engine's compile stage (the
``hlo``, ``cost``, ``passes``, ``asm`` and ``memory`` outputs, and ``compile_ms``)
runs inside ``bypassed()``, because an executable loaded from the cache prints
differently (XLA renumbers its stack frames) and was not compiled by this run. When
JAX's private switch that ``bypassed()`` needs is missing, ``enable`` leaves the
cache off rather than risk it.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

#: JAX's own words when an entry cannot be read or written (a corrupt or foreign
#: file, a full directory): JAX compiles instead, and the run must not show it.
_CACHE_WARNINGS = r"Error (reading|writing) persistent compilation cache"

_enabled = False


def _switch() -> Any | None:
    """JAX's module whose ``_cache_checked``/``_cache_used`` decide whether a compile
    consults the persistent cache, or None if this JAX has no such thing."""
    try:
        from jax._src import compilation_cache
    except ImportError:
        return None
    needed = ("_cache_checked", "_cache_used", "_cache_initialized_mutex")
    return compilation_cache if all(hasattr(compilation_cache, n) for n in needed) else None


def enable(path: str) -> bool:
    """Point JAX's persistent cache at ``path`` with no thresholds (the compiles it
    saves are the small eager ones), before the backend starts. Returns whether it is
    on."""
    global _enabled
    import jax

    if _switch() is None:
        return False
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.config.update("jax_compilation_cache_max_size", -1)  # bounded by the zygote
    warnings.filterwarnings("ignore", message=_CACHE_WARNINGS)
    _enabled = True
    return True


@contextlib.contextmanager
def bypassed() -> Iterator[None]:
    """Compile as if the persistent cache were off: neither read nor written."""
    module = _switch() if _enabled else None
    if module is None:
        yield
        return
    with module._cache_initialized_mutex:
        saved = module._cache_checked, module._cache_used
        module._cache_checked, module._cache_used = True, False
    try:
        yield
    finally:
        with module._cache_initialized_mutex:
            module._cache_checked, module._cache_used = saved
