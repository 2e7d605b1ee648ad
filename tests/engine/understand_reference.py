"""What JAX itself says, in a fresh process, for the ``recompiles`` and ``export`` tests:
run as ``python understand_reference.py recompiles|export`` with a JSON message on
stdin, it prints JSON. Nothing of jaxplay is imported: the snippet is compiled under
the same file name the engine gives it, so JAX's texts name the same places.

recompiles: the snippet's top-level code, then ``entry(*args)``, with
``jax_explain_cache_misses`` on; prints every cache-miss explanation JAX logged (an
object's ``id=`` removed, as the engine does) and, per function name, how many times
JAX traced it.

export: ``jax.export.export(jax.jit(entry), platforms=...)`` on
``jax.export.symbolic_args_specs(args, shapes)``; prints the avals, platforms, calling
convention, StableHLO, and the deserialized artifact's outputs on the arguments.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

SNIPPET_FILENAME = "snippet.py"


def _module(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "snippet", "__file__": SNIPPET_FILENAME}
    exec(compile(code, SNIPPET_FILENAME, "exec"), namespace)
    return namespace


def recompiles(message: dict[str, Any]) -> dict[str, Any]:
    import jax
    from jax._src import monitoring

    explanations: list[str] = []
    traced: dict[str, int] = {}

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if "cache miss" in text.lower():
                explanations.append(re.sub(r" id=\d+", "", text))

    def duration(event: str, duration_secs: float, **kwargs: Any) -> None:
        if event == "/jax/core/compile/jaxpr_trace_duration":
            name = str(kwargs.get("fun_name"))
            traced[name] = traced.get(name, 0) + 1

    logging.getLogger("jax").addHandler(Handler(logging.WARNING))
    monitoring.register_event_duration_secs_listener(duration)
    jax.config.update("jax_explain_cache_misses", True)
    namespace = _module(message["code"])
    args = eval(message["args"], namespace)
    jax.block_until_ready(namespace[message["entry"]](*args))
    return {"explanations": explanations, "traced": traced}


def export(message: dict[str, Any]) -> dict[str, Any]:
    import jax
    import numpy as np
    from jax import export as jex

    namespace = _module(message["code"])
    args = eval(message["args"], namespace)
    fn = jax.jit(namespace[message["entry"]])
    specs = jex.symbolic_args_specs(args, message["shapes"])
    exported = jex.export(fn, platforms=tuple(message["platforms"]))(*specs)
    back = jex.deserialize(exported.serialize())
    outputs = [np.asarray(o).tolist() for o in jax.tree_util.tree_leaves(back.call(*args))]
    return {
        "in_avals": [a.str_short() for a in exported.in_avals],
        "out_avals": [a.str_short() for a in exported.out_avals],
        "platforms": list(exported.platforms),
        "calling_convention_version": exported.calling_convention_version,
        "stablehlo": exported.mlir_module(),
        "outputs": outputs,
    }


if __name__ == "__main__":
    what = {"recompiles": recompiles, "export": export}[sys.argv[1]]
    json.dump(what(json.load(sys.stdin)), sys.stdout)
