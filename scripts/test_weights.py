#!/usr/bin/env python3
"""Writes tests/file_weights.json, the seconds each test file took in a whole
``make test``, from the JUnit XML pytest wrote for it (several runs: each file's
longest, so that a run where the file ran whole counts over one where most of it
skipped, as on a clone without the other JAX versions). The suite's scheduler
(tests/conftest.py) hands the longest files out first, so that a long one is not left
for the end while the other process idles.

    .venv/bin/python -m pytest -q -n 2 --junitxml=/tmp/suite.xml
    .venv/bin/python scripts/test_weights.py /tmp/suite.xml [/tmp/ci-suite.xml ...]

The figures are a guide, not a check: a file missing from them (a new one) is handed
out first among the rest, and a stale figure costs minutes at worst, never a test.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "file_weights.json"


def weights(junit: Path) -> dict[str, float]:
    per_file: Counter[str] = Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        # classname: tests.browser.test_page (or ....TestClass): the file is the module
        parts = (case.get("classname") or "").split(".")
        module = next((i for i, p in enumerate(parts) if p.startswith("test_")), None)
        if module is None:
            continue
        per_file["/".join(parts[: module + 1]) + ".py"] += float(case.get("time") or 0.0)
    return {f: round(s, 1) for f, s in per_file.items()}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    found: dict[str, float] = {}
    for junit in argv:
        run = weights(Path(junit))
        if not run:
            print(f"{junit}: no test cases", file=sys.stderr)
            return 1
        for file, seconds in run.items():
            found[file] = max(found.get(file, 0.0), seconds)
    OUT.write_text(json.dumps(found, indent=0, sort_keys=True) + "\n")
    print(f"{OUT}: {len(found)} files, {sum(found.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
