"""Turns the request's text into Python objects: the module, the args, the entry."""

from __future__ import annotations

import linecache
import sys
import types
from typing import Any

from sandbox.protocol.requests import SNIPPET_FILENAME

ARGS_FILENAME = "<args>"
MODULE_NAME = "snippet"


class EntryError(Exception):
    """The entry named in the request is missing or not callable."""


def register_source(filename: str, source: str) -> None:
    """Make tracebacks and ``inspect`` show the user's lines."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def execute_module(code: str) -> types.ModuleType:
    """Execute ``code`` as a fresh module with the pre-imports of SPEC §1."""
    import jax
    import jax.lax as lax
    import jax.numpy as jnp
    import numpy as np

    register_source(SNIPPET_FILENAME, code)
    module = types.ModuleType(MODULE_NAME)
    module.__file__ = SNIPPET_FILENAME
    module.__dict__.update(jax=jax, jnp=jnp, lax=lax, np=np)
    sys.modules[MODULE_NAME] = module
    compiled = compile(code, SNIPPET_FILENAME, "exec", dont_inherit=True)
    exec(compiled, module.__dict__)
    return module


def evaluate(expr: str, namespace: dict[str, Any], filename: str = ARGS_FILENAME) -> Any:
    register_source(filename, expr)
    return eval(compile(expr, filename, "eval", dont_inherit=True), namespace)


def evaluate_args(expr: str, namespace: dict[str, Any]) -> tuple[Any, ...]:
    """The example arguments: a tuple, or one value taken as a 1-tuple."""
    value = evaluate(expr, namespace)
    return value if isinstance(value, tuple) else (value,)


def resolve_entry(module: types.ModuleType, entry: str) -> Any:
    """The function ``entry`` names: a name in the module, or a dotted path from one
    by attributes (``jax.nn.gelu``, ``jnp.linalg.solve``), as the snippet would spell it."""
    head, *rest = entry.split(".")
    if head not in module.__dict__:
        defined = sorted(
            name
            for name, value in module.__dict__.items()
            if callable(value)
            and not name.startswith("_")
            and not isinstance(value, types.ModuleType)
        )
        listing = ", ".join(defined) if defined else "none"
        raise EntryError(f"the code defines no {head!r}; callables it defines: {listing}")
    fn = module.__dict__[head]
    path = head
    for name in rest:
        if not hasattr(fn, name):
            raise EntryError(f"{path!r} has no attribute {name!r}")
        fn = getattr(fn, name)
        path = f"{path}.{name}"
    if not callable(fn):
        raise EntryError(f"{entry!r} is a {type(fn).__name__}, not a function")
    return fn


def as_python(value: Any) -> Any:
    """JSON option values as JAX wants them: lists become tuples, recursively."""
    if isinstance(value, list):
        return tuple(as_python(v) for v in value)
    return value
