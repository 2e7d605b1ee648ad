"""Walking a jaxpr into the jaxprs its equations hold (jit's, scan's and while's
bodies, cond's branches, custom rules' functions...). This module never imports JAX:
it reads the objects it is given."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def sub_jaxprs(params: dict[str, Any]) -> Iterator[Any]:
    """The jaxprs in one equation's ``params`` (a ClosedJaxpr gives its Jaxpr)."""
    for value in params.values():
        for item in value if isinstance(value, tuple | list) else (value,):
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns") and hasattr(inner, "outvars"):
                yield inner
