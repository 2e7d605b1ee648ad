"""Generates the editor's completion index for one JAX version: the public names of
``jax``, ``jax.numpy``, ``jax.lax``, ``jax.nn``, ``jax.random`` (and a few of their
submodules) and of the libraries runs import (flax, optax, equinox: sandbox/environments/libraries.py),
each with its kind, its signature and the first line of its documentation, from what
that version's environment has installed. Nothing is fetched. The page loads the file
of the JAX version picked (frontend/src/editor/completions.ts) the first time the editor asks
for a completion: no server call per keystroke.

    .venv/bin/python scripts/gen_completions.py                 # the default version (.venv)
    .venv/bin/python scripts/gen_completions.py --version 0.10.2  # .jaxplay/versions/0.10.2
    .venv/bin/python scripts/gen_completions.py --check         # fail if a committed file
                                                                # is not what it would write

Each file is ``frontend/src/generated/completions/<version>.json``:
``{"jax": version, "modules": {module: {name: [kind, signature, doc]}}}`` with kind one of
``f`` (function), ``c`` (class), ``m`` (module), ``v`` (anything else); one module per
line. ``default.ts`` beside them names the default version's file (the page's fallback).
The index of a version is made by that version's interpreter (``--emit``, printing the
JSON), so the names are what that JAX really has.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "frontend" / "src" / "generated" / "completions"
VERSIONS = ROOT / ".jaxplay" / "versions"
#: the modules indexed, where installed (a library a version does not offer is skipped)
MODULES = (
    "jax",
    "jax.numpy",
    "jax.numpy.linalg",
    "jax.lax",
    "jax.nn",
    "jax.nn.initializers",
    "jax.random",
    "jax.tree",
    "jax.sharding",
    "flax.nnx",
    "flax.linen",
    "optax",
    "equinox",
)
#: a signature or a doc line longer than this is cut (with an ellipsis)
MAX_SIGNATURE = 90
MAX_DOC = 90


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind(obj: Any) -> str:
    if inspect.ismodule(obj):
        return "m"
    if inspect.isclass(obj):
        return "c"
    if callable(obj):
        return "f"
    return "v"


def _signature(obj: Any) -> str:
    if not callable(obj) or inspect.ismodule(obj):
        return ""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    # names and defaults, as Python's own help shows a call (the annotations are long)
    text = str(plain_signature(signature))
    # default values whose repr names an object's address are not the same twice
    if " at 0x" in text:
        return ""
    return _cut(text, MAX_SIGNATURE)


def plain_signature(signature: inspect.Signature) -> inspect.Signature:
    """The signature without its annotations."""
    params = [p.replace(annotation=p.empty) for p in signature.parameters.values()]
    return signature.replace(parameters=params, return_annotation=signature.empty)


def _doc(obj: Any) -> str:
    if not (callable(obj) or inspect.ismodule(obj)):
        return ""
    doc = inspect.getdoc(obj) or ""
    first = next((line for line in doc.splitlines() if line.strip()), "")
    return _cut(first, MAX_DOC)


def module_index(name: str) -> dict[str, list[str]] | None:
    """``{public name: [kind, signature, first doc line]}`` of one module; None where it
    is not installed."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    public = getattr(module, "__all__", None)
    names = sorted(set(public) if public is not None else dir(module))
    index: dict[str, list[str]] = {}
    for attr in names:
        if attr.startswith("_"):
            continue
        try:
            obj = getattr(module, attr)
        except Exception:  # a deprecated name that raises when read
            continue
        index[attr] = [_kind(obj), _signature(obj), _doc(obj)]
    return index


def build(modules: tuple[str, ...] = MODULES) -> dict[str, Any]:
    import jax

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = {name: module_index(name) for name in modules}
    return {"jax": jax.__version__, "modules": {k: v for k, v in found.items() if v is not None}}


def dumps(index: dict[str, Any]) -> str:
    """Compact JSON, one module per line (small, gzip-friendly, readable diffs)."""
    lines = [
        f"  {json.dumps(name)}: {json.dumps(members, ensure_ascii=False, separators=(',', ':'))}"
        for name, members in index["modules"].items()
    ]
    return f'{{"jax": {json.dumps(index["jax"])}, "modules": {{\n' + ",\n".join(lines) + "\n}}\n"


def default_ts(version: str) -> str:
    return (
        "// Generated by scripts/gen_completions.py: the default JAX version's completion index,\n"
        "// the page's fallback for a version it has no index of.\n"
        f'export const DEFAULT_COMPLETIONS = "{version}";\n'
    )


def interpreter(version: str | None) -> str:
    if version is None:
        return str(ROOT / ".venv" / "bin" / "python")
    python = VERSIONS / version / "bin" / "python"
    if not python.exists():
        sys.exit(f"gen_completions: JAX {version} is not installed ({python})")
    return str(python)


def emitted(version: str | None) -> str:
    """The index as the version's own interpreter makes it."""
    result = subprocess.run(
        [interpreter(version), str(Path(__file__).resolve()), "--emit"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"gen_completions: {result.stderr.strip()[-2000:]}")
    return result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", help="an installed JAX version (default: .venv's)")
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.emit:
        sys.stdout.write(dumps(build()))
        return
    text = emitted(args.version)
    version = json.loads(text)["jax"]
    files = {OUT / f"{version}.json": text}
    if args.version is None:
        files[OUT / "default.ts"] = default_ts(version)
    if args.check:
        stale = [p for p, t in files.items() if not p.exists() or p.read_text() != t]
        if stale:
            names = ", ".join(str(p.relative_to(ROOT)) for p in stale)
            sys.exit(f"gen_completions: {names} not what JAX {version} gives; run {__file__}")
        print(f"gen_completions: the index of JAX {version} is in step")
        return
    OUT.mkdir(parents=True, exist_ok=True)
    for path, content in files.items():
        path.write_text(content)
        print(f"wrote {path.relative_to(ROOT)} ({len(content.encode())} bytes)")


if __name__ == "__main__":
    main()
