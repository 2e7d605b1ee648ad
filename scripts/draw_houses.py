"""Draw the three houses from their imports: the server (backend/), the sandbox
(sandbox/) and the page (frontend/src), each as its packages (folders) and the
imports between them, into docs/architecture.md between its ``houses`` markers.

    .venv/bin/python scripts/draw_houses.py            # rewrite the drawing
    .venv/bin/python scripts/draw_houses.py --check    # fail if it is out of date (make lint)
    .venv/bin/python scripts/draw_houses.py --root DIR --print   # another checkout's, printed

Python's imports are read by grimp (import-linter's graph: lazy and TYPE_CHECKING
imports count, as the contracts count them); the page's from each module's ``import``
and ``import()`` specifiers. A package is a folder one level under the house's root
(``backend/app/relay``, ``sandbox/pool``, ``frontend/src/panes``); a module loose at a
root is its own node, so a flat house draws as many nodes as it has modules. Each
node says how many modules it holds (not lines: the drawing changes with the
structure, not with every edit).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- houses: drawn by scripts/draw_houses.py; do not edit by hand -->"
END = "<!-- /houses -->"

#: (house, its root module path, how deep a package is named below the root)
PYTHON_HOUSES = (("backend", "backend", 3), ("sandbox", "sandbox", 2))
TS_IMPORT = re.compile(r"""(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)["']([^"']+)["']""", re.M)


def python_edges(
    root: Path, package: str, depth: int
) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """Each package's modules (counted), and the imports between packages, of one Python house.
    Run in a child interpreter with ``root`` first on the path, so another checkout's
    house is drawn from its own files."""
    code = f"""
import json, sys, grimp
sys.path.insert(0, {str(root)!r})
graph = grimp.build_graph({package!r}, cache_dir=None)
edges = [[m, i] for m in graph.modules for i in graph.find_modules_directly_imported_by(m)]
print(json.dumps({{"modules": sorted(graph.modules), "edges": edges}}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    ).stdout

    found = json.loads(out)
    modules: dict[str, int] = defaultdict(int)
    for module in found["modules"]:
        path = root / Path(*module.split("."))
        file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        if file.exists():
            modules[_node(module, depth)] += 1
    edges = set()
    for a, b in found["edges"]:
        if b.split(".")[0] != package:
            continue
        na, nb = _node(a, depth), _node(b, depth)
        if na != nb:
            edges.add((na, nb))
    return dict(modules), edges


def _node(module: str, depth: int) -> str:
    """The package a module belongs to: its first ``depth`` parts, or the module
    itself where it sits loose above that depth."""
    parts = module.split(".")
    if len(parts) >= depth:
        return ".".join(parts[:depth])
    return module


def ts_edges(src: Path) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """The page's folders' modules (counted) and imports (a module loose at src/ is its own node)."""
    modules: dict[str, int] = defaultdict(int)
    edges = set()
    for file in sorted(src.rglob("*.ts")):
        node = _ts_node(file, src)
        text = file.read_text()
        modules[node] += 1
        for spec in TS_IMPORT.findall(text):
            if not spec.startswith("."):
                continue
            target = (file.parent / spec).resolve()
            if target.suffix not in ("", ".ts", ".js"):
                continue  # data: json, css, raw text
            try:
                target.relative_to(src.resolve())
            except ValueError:
                continue
            other = _ts_node(target.with_suffix(".ts"), src.resolve())
            if other != node:
                edges.add((node, other))
    return dict(modules), edges


def _ts_node(file: Path, src: Path) -> str:
    rel = file.resolve().relative_to(src.resolve())
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def draw(name: str, modules: dict[str, int], edges: set[tuple[str, str]], strip: str) -> str:
    """One house as a Mermaid graph (rendered where the doc is read) and as words."""

    ancestors = {n for n in modules for m in modules if m.startswith(n + ".")}

    def short(node: str) -> str:
        label = (node.removeprefix(strip) if node != strip.rstrip(".") else node).replace(".", "/")
        return label + "/__init__" if node in ancestors else label

    key = re.sub(r"\W", "_", name)
    ident = {node: f"{key}_{i}" for i, node in enumerate(sorted(modules))}
    out = [
        f"**{name}**: {len(modules)} packages or loose modules, {len(edges)} imports between them",
        "",
    ]
    out += ["```mermaid", "flowchart TD"]
    for node in sorted(modules):
        out.append(f'  {ident[node]}["{short(node)} · {modules[node]}"]')
    for a, b in sorted(edges):
        if a in ident and b in ident:
            out.append(f"  {ident[a]} --> {ident[b]}")
    out += ["```", ""]
    out += ["| package | modules | imports |", "| --- | ---: | --- |"]
    for node in sorted(modules):
        targets = sorted(short(b) for a, b in edges if a == node and b in modules)
        out.append(f"| `{short(node)}` | {modules[node]} | {', '.join(targets) or '—'} |")
    return "\n".join(out)


def houses(root: Path) -> str:
    parts = []
    for name, package, depth in PYTHON_HOUSES:
        modules, edges = python_edges(root, package, depth)
        parts.append(draw(name, modules, edges, package + "."))
    src = root / "frontend" / "src"
    modules, edges = ts_edges(src)
    parts.append(draw("frontend/src", modules, edges, ""))
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--print", action="store_true", help="print, write nothing")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to draw")
    args = parser.parse_args()
    drawing = houses(args.root.resolve())
    if args.print:
        print(drawing)
        return
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{DOC} has no {BEGIN!r} ... {END!r} markers")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{drawing}\n{END}{tail}"
    if args.check:
        if new != doc:
            raise SystemExit(
                "docs/architecture.md's drawing of the houses is out of date: "
                "run .venv/bin/python scripts/draw_houses.py"
            )
        return
    DOC.write_text(new)


if __name__ == "__main__":
    main()
