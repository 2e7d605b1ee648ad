"""``make test`` runs the suite in two pytest-xdist processes (tests/conftest.py's
scheduler): every collected test must run there exactly as in one process.

The schema tests are the case that broke it: schemathesis gives its 16 cases one
node id, and xdist's grouped scheduling keeps tests by node id, so all but one were
silently dropped (15 tests fewer, and nothing said so).
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import FILE_WEIGHTS, file_weights, heaviest_first
from tests.test_gates import pytest_run

pytestmark = pytest.mark.slow

#: a few quick files from two groups, one with the shared node ids
#: (the lighter first, so that the scheduler hands them out in another order than
#: they were collected in)
FILES = ("tests/protocol/test_outputs_registry.py", "tests/server/test_schema.py")


def _count(output: str, what: str) -> int:
    found = re.search(rf"(\d+) {what}", output)
    return int(found.group(1)) if found else 0


def test_two_processes_run_every_collected_test() -> None:
    collected = pytest_run("--collect-only", "-q", "-p", "no:cacheprovider", *FILES)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    assert heaviest_first(FILES, file_weights()) != list(FILES), "pick files the scheduler reorders"
    assert len(ids) > len(set(ids)), "the case of shared node ids is gone: pick another"
    ran = pytest_run("-v", "-n", "2", "-p", "no:cacheprovider", *FILES)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert _count(ran.stdout, "passed") + _count(ran.stdout, "skipped") == len(ids), ran.stdout
    # each file whole in one process (its module fixtures made once), as it was collected
    workers: dict[str, set[str]] = {}
    for worker, file in re.findall(
        r"^\[(gw\d+)\].*? (?:PASSED|SKIPPED|FAILED) (\S+?)::", ran.stdout, re.M
    ):
        workers.setdefault(file, set()).add(worker)
    assert set(workers) == set(FILES), ran.stdout
    assert all(len(w) == 1 for w in workers.values()), workers


def test_files_are_handed_out_browser_first_then_longest_first() -> None:
    ids = [
        "tests/cli/test_a.py::t1",
        "tests/browser/test_short.py::t",
        "tests/cli/test_a.py::t2",
        "tests/pool/test_long.py::t",
        "tests/browser/test_long.py::t",
        "tests/zygote/test_new.py::t",
        "tests/browser/test_new.py::t",
    ]
    weights = {
        "tests/cli/test_a.py": 5.0,
        "tests/browser/test_short.py": 1.0,
        "tests/pool/test_long.py": 40.0,
        "tests/browser/test_long.py": 30.0,
    }
    assert heaviest_first(ids, weights) == [
        "tests/browser/test_new.py::t",  # no weight: first of its group
        "tests/browser/test_long.py::t",
        "tests/browser/test_short.py::t",
        "tests/zygote/test_new.py::t",
        "tests/pool/test_long.py::t",
        "tests/cli/test_a.py::t1",  # a file's tests in their order
        "tests/cli/test_a.py::t2",
    ]


def test_the_weights_name_files_that_exist() -> None:
    """A renamed or removed file's weight is dead weight: scripts/test_weights.py makes
    the file again from a whole run."""
    weights = file_weights()
    assert len(weights) > 100
    root = FILE_WEIGHTS.parents[1]
    gone = [f for f in weights if not (root / f).is_file()]
    assert gone == [], gone
