"""Refresh the golden files from JAX itself: ``python -m tests.golden.regenerate [CASE ...]``.

Runs ``reference.py`` on each case (all of them by default) in a process of its own and
writes ``data/<case>.json``. Review the diff before committing: a change in a text
means JAX (or the case) changed, not that the engine is right.
"""

from __future__ import annotations

import argparse
import json
import sys

from tests.golden import (
    DATA_DIR,
    case_names,
    close_reference_servers,
    parallel,
    run_reference,
    to_golden,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    options = parser.parse_args(argv)

    known = case_names()
    names = options.cases or known
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"unknown cases: {', '.join(unknown)}")

    DATA_DIR.mkdir(exist_ok=True)
    results = parallel(run_reference, names, workers=options.workers)
    close_reference_servers()
    failed = 0
    for name in names:
        result = results[name]
        if isinstance(result, Exception):
            print(f"FAILED {name}: {result}", file=sys.stderr)
            failed += 1
            continue
        path = DATA_DIR / f"{name}.json"
        text = json.dumps(to_golden(result), indent=1, sort_keys=True, ensure_ascii=False)
        old = path.read_text() if path.exists() else None
        path.write_text(text + "\n")
        state = "unchanged" if old == text + "\n" else ("new" if old is None else "updated")
        errors = [
            f"{e['pipeline']}: {e['kind']} at {e['stage']}, line {e['line']}"
            for e in result["errors"]
        ]
        what = "; ".join(errors) or "ok"
        print(f"{state:9} {name}: {what}")

    stale = sorted(p.name for p in DATA_DIR.glob("*.json") if p.stem not in known)
    for name in stale:
        print(f"stale     {name}: no such case any more; delete it", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
