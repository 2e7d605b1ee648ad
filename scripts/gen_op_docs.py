"""Generates the page's documentation for jaxpr primitives and StableHLO ops (the tooltips
of the jaxpr, StableHLO, HLO and Graph panes), from what is installed: JAX's own
docstrings and transformation-rule tables, and the StableHLO dialect's op descriptions
that jaxlib ships (generated from the StableHLO specification's TableGen definitions).
Nothing is fetched; run it again after upgrading JAX and commit the result:

    .venv/bin/python scripts/gen_op_docs.py          # writes frontend/src/generated/*.json
    .venv/bin/python scripts/gen_op_docs.py --check  # fails if they are not what it writes
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
import warnings
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "frontend" / "src" / "generated"
JAX_DOCS = "https://docs.jax.dev/en/latest/_autosummary/"
STABLEHLO_SPEC = "https://openxla.org/stablehlo/spec#"

# Primitives whose public function has another name or lives elsewhere than jax.lax.
FUNCTION_OF = {
    "jit": "jax.jit",
    "pjit": "jax.jit",
    "closed_call": "jax.jit",
    "cond": "jax.lax.cond",
    "switch": "jax.lax.switch",
    "while": "jax.lax.while_loop",
    "scan": "jax.lax.scan",
    "custom_jvp_call": "jax.custom_jvp",
    "custom_vjp_call": "jax.custom_vjp",
    "custom_vjp_call_jaxpr": "jax.custom_vjp",
    "remat": "jax.checkpoint",
    "checkpoint": "jax.checkpoint",
    "random_bits": "jax.random.bits",
    "random_seed": "jax.random.key",
    "random_wrap": "jax.random.wrap_key_data",
    "random_unwrap": "jax.random.key_data",
    "random_fold_in": "jax.random.fold_in",
    "random_split": "jax.random.split",
    "threefry2x32": "jax.random.key",
    "reduce_sum": "jax.lax.reduce_sum",
    "reduce_max": "jax.lax.reduce_max",
    "reduce_min": "jax.lax.reduce_min",
    "reduce_prod": "jax.lax.reduce_prod",
    "reduce_and": "jax.lax.reduce_and",
    "reduce_or": "jax.lax.reduce_or",
    "argmax": "jax.lax.argmax",
    "argmin": "jax.lax.argmin",
    "psum": "jax.lax.psum",
    "pmax": "jax.lax.pmax",
    "pmin": "jax.lax.pmin",
    "all_gather": "jax.lax.all_gather",
    "all_to_all": "jax.lax.all_to_all",
    "ppermute": "jax.lax.ppermute",
    "axis_index": "jax.lax.axis_index",
    "shard_map": "jax.shard_map",
    "xla_pmap": "jax.pmap",
    "debug_callback": "jax.debug.callback",
    "pure_callback": "jax.pure_callback",
    "lu": "jax.lax.linalg.lu",
    "cholesky": "jax.lax.linalg.cholesky",
    "eigh": "jax.lax.linalg.eigh",
    "qr": "jax.lax.linalg.qr",
    "svd": "jax.lax.linalg.svd",
    "triangular_solve": "jax.lax.linalg.triangular_solve",
    "custom_linear_solve": "jax.lax.custom_linear_solve",
    "and": "jax.lax.bitwise_and",
    "or": "jax.lax.bitwise_or",
    "not": "jax.lax.bitwise_not",
    "xor": "jax.lax.bitwise_xor",
    "eig": "jax.lax.linalg.eig",
    "fft": "jax.lax.fft",
    "debug_print": "jax.debug.print",
    "device_put": "jax.device_put",
    "io_callback": "jax.experimental.io_callback",
    "reduce_scatter": "jax.lax.psum_scatter",
    "broadcast_to": "jax.numpy.broadcast_to",
    "approx_top_k": "jax.lax.approx_max_k",
    "random_gamma": "jax.random.gamma",
    "ffi_call": "jax.ffi.ffi_call",
}

MODULES = ("jax", "jax.numpy", "jax.scipy.linalg", "jax.nn", "jax.random", "jax.lax.linalg")


TEX = {
    r"\times": "×",
    r"\cdot": "·",
    r"\leq": "≤",
    r"\geq": "≥",
    r"\neq": "≠",
    r"\pi": "π",
    r"\infty": "∞",
    r"\sqrt": "√",
}


def tex_to_text(text: str) -> str:
    """The little TeX in JAX's one-line summaries (`\\mathrm{sin}(x)`, `x \\times y`) as text."""
    text = re.sub(r"\\(?:mathrm|operatorname|text)\{([^{}]*)\}", r"\1", text)
    for tex, plain in TEX.items():
        text = text.replace(tex, plain)
    return re.sub(r"\\(exp|log|sin|cos|tan|tanh|sinh|cosh|max|min)\b", r"\1", text)


def first_paragraph(doc: str | None, limit: int = 320) -> str:
    if not doc:
        return ""
    para = inspect.cleandoc(doc).split("\n\n")[0]
    para = re.sub(r":\w+:`~?([^`<]*?)(?:\s*<[^>]*>)?`", r"`\1`", para)  # :func:`~jax.x` -> `jax.x`
    para = re.sub(r"``([^`]*)``", r"`\1`", para)
    para = tex_to_text(para)
    para = " ".join(para.split())
    return para if len(para) <= limit else para[: limit - 1].rsplit(" ", 1)[0] + "…"


def resolve(path: str) -> Any:
    module, _, name = path.rpartition(".")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated aliases still answer; they are not used
        return getattr(obj, name, None)


def shown_default(value: Any) -> str | None:
    """A default as Python would spell it, for plain values only (a sentinel's repr
    carries its address, which would change the generated file on every run)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, tuple) and all(isinstance(v, (int, str)) for v in value):
        return repr(value)
    return None


def signature(fn: Any, path: str) -> str:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return ""
    shown = []
    for p in params.values():
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if p.name.startswith("_"):
            continue
        default = None if p.default is inspect.Parameter.empty else shown_default(p.default)
        shown.append(p.name if default is None else f"{p.name}={default}")
    text = f"{path}({', '.join(shown)})"
    return text if len(text) <= 160 else text[:159] + "…"


def primitives() -> dict[str, Any]:
    for m in MODULES:
        importlib.import_module(m)
    from jax._src.interpreters import ad, batching, mlir

    rules: dict[str, set[str]] = {}

    def note(table: Any, rule: str) -> None:
        for prim in table:
            rules.setdefault(prim.name, set()).add(rule)

    note(ad.primitive_jvps, "jvp")
    note(ad.primitive_transposes, "transpose")
    note(batching.fancy_primitive_batchers, "vmap")
    note(mlir._lowerings, "lowering")
    for table in mlir._platform_specific_lowerings.values():
        note(table, "lowering")
    out: dict[str, Any] = {}
    for name in sorted(rules):
        path = FUNCTION_OF.get(name, f"jax.lax.{name}")
        fn = resolve(path)
        if fn is None or not callable(fn):
            fn, path = None, ""
        out[name] = {
            "summary": first_paragraph(getattr(fn, "__doc__", None)) if fn else "",
            "signature": signature(fn, path) if fn else "",
            "transforms": sorted(rules[name]),
            "url": f"{JAX_DOCS}{path}.html" if path else "",
        }
    return out


def operands(op_class: Any) -> list[str]:
    """The operands and attributes an op's builder takes, as the spec names them."""
    try:
        params = inspect.signature(op_class.__init__).parameters
    except (TypeError, ValueError):
        return []
    return [p for p in params if p not in ("self", "result", "results", "loc", "ip")]


def stablehlo_ops() -> dict[str, Any]:
    """Each StableHLO op's description, from the dialect bindings jaxlib ships."""
    gen = importlib.import_module("jaxlib.mlir.dialects._stablehlo_ops_gen")
    out: dict[str, Any] = {}
    for obj in vars(gen).values():
        name = getattr(obj, "OPERATION_NAME", None)
        if not isinstance(name, str) or not name.startswith("stablehlo."):
            continue
        doc = inspect.cleandoc(obj.__doc__ or "")
        anchor = re.search(r"spec\.md#([\w-]+)", doc)
        # The TableGen text: a summary paragraph, then "See: <spec link>", then an example.
        body = re.split(r"\n\s*See:|\n\s*Example:", doc)[0]
        if not doc:
            continue  # the op's Adaptor class: same name, no description
        op = name.removeprefix("stablehlo.")
        out[op] = {
            "summary": first_paragraph(body, 400),
            "operands": operands(obj),
            "url": STABLEHLO_SPEC + (anchor.group(1) if anchor else op),
        }
    return dict(sorted(out.items()))


def generate() -> dict[str, str]:
    import jax
    import jaxlib

    prims = {
        "source": "generated by scripts/gen_op_docs.py from the docstrings and rule tables of "
        f"jax {jax.__version__}",
        "licence": "JAX: Apache-2.0",
        "primitives": primitives(),
    }
    ops = {
        "source": "generated by scripts/gen_op_docs.py from the StableHLO dialect op descriptions "
        f"shipped in jaxlib {jaxlib.__version__} (StableHLO's TableGen definitions, "
        "which follow the StableHLO specification, docs/spec.md of openxla/stablehlo)",
        "licence": "StableHLO: Apache-2.0 (Copyright the OpenXLA authors)",
        "ops": stablehlo_ops(),
    }
    return {
        "jaxpr-primitives.json": json.dumps(prims, indent=1, sort_keys=True) + "\n",
        "stablehlo-ops.json": json.dumps(ops, indent=1, sort_keys=True) + "\n",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the files differ")
    check = parser.parse_args().check
    stale = []
    for name, text in generate().items():
        path = OUT / name
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(OUT.parents[2])}")
    if stale:
        print(f"gen_op_docs: {', '.join(stale)} out of date; run scripts/gen_op_docs.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
