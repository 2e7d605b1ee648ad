"""The golden corpus on every installed JAX version besides the default.

tests/engine/test_golden.py holds the default version to its golden files byte for byte.
On the other installed versions (``jaxplay versions add``; CI installs one) the texts
are that version's own, so what is checked is what must hold on every version: each
case ends as its expectations say (``ok``, or the same error kind at the same stage
and line), every output it asks for (timing aside: its budget would only add time)
the default version produced (its golden file) is produced here too, and
``accepted`` names that version.
The engine runs in that version's environment (a warm engine on its interpreter:
JAX imported once, a child forked per case), the way its jailed zygote runs it,
without the jail (tests/pool/test_versions_jail.py
covers the jail).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sandbox.environments.versions import installed  # noqa: E402
from sandbox.protocol import RunRequest  # noqa: E402
from tests.gates import missing_requirement  # noqa: E402
from tests.golden import case_names, load_case, load_golden, parallel, request_of  # noqa: E402
from tests.support.warm_engine import WarmEngine  # noqa: E402

VERSIONS_DIR = Path(os.environ.get("JAXPLAY_JAX_VERSIONS_DIR") or ROOT / ".jaxplay" / "versions")
OTHERS = {v: env for v, env in installed(VERSIONS_DIR).items() if not env.default}
CASES = case_names()


def _request(case: str) -> RunRequest:
    data = request_of(load_case(case))
    data["outputs"] = [o for o in data.get("outputs", []) or [] if o != "timing"] or ["jaxpr"]
    return RunRequest.model_validate(data)


def _run(engines: dict[str, WarmEngine], item: tuple[str, str]) -> list[dict[str, Any]]:
    version, case = item
    events = engines[version].run(_request(case))
    assert events and events[-1]["type"] == "done", events[-3:]
    return events


def _older(version: str, since: str) -> bool:
    """``version`` is before ``since`` (a case's ``expect.since``: the first JAX
    version that has what the case uses)."""
    return tuple(map(int, version.split("."))) < tuple(map(int, since.split(".")))


@pytest.fixture(scope="module")
def results() -> Iterator[dict[tuple[str, str], Any]]:
    # one warm engine per version (its JAX imported once, a child forked per case)
    engines = {v: WarmEngine(python=env.python) for v, env in OTHERS.items()}
    try:
        for engine in engines.values():
            engine.start()
        items = [(v, case) for v in OTHERS for case in CASES]
        yield parallel(functools.partial(_run, engines), items, workers=2)
    finally:
        for engine in engines.values():
            engine.stop()


def test_another_version_is_installed() -> None:
    """Without one the cases below do not run: said here, with the command that installs
    one (CI, which installs three, fails instead)."""
    if not OTHERS:
        missing_requirement(
            f"no other JAX version installed in {VERSIONS_DIR}",
            ".venv/bin/jaxplay versions add 0.10.2",
        )


@pytest.mark.slow
# The module's fixture runs the whole corpus on every installed version (two at a
# time) inside the first test's time: CI's three versions take minutes, a developer's
# nine several more; each engine run has its own 300 s limit in _run.
@pytest.mark.timeout(60 + 200 * len(OTHERS))
@pytest.mark.skipif(not OTHERS, reason=f"no other JAX version installed in {VERSIONS_DIR}")
@pytest.mark.parametrize("version", sorted(OTHERS))
@pytest.mark.parametrize("case", CASES)
def test_a_case_holds_on_every_installed_version(
    results: dict[tuple[str, str], Any], version: str, case: str
) -> None:
    events = results[(version, case)]
    if isinstance(events, Exception):
        raise events
    expect = load_case(case).get("expect", {})
    request = _request(case)
    accepted = [e for e in events if e["type"] == "accepted"]
    assert accepted and accepted[0]["worker"]["jax_version"] == version
    errors = [e for e in events if e["type"] == "error"]
    assert not [e for e in errors if e["kind"] == "EngineError"], errors
    if "since" in expect and _older(version, expect["since"]):
        # what the case uses may be newer than this JAX: it holds, or it ends with
        # errors that each say in words what to do (never jaxplay's own failure)
        assert all(e["hint"] for e in errors), f"jax {version}: {errors}"
        return
    if "error" in expect:
        assert errors, f"jax {version}: no error, expected {expect['error']}"
        for key, value in expect["error"].items():
            # line None: JAX raised outside the user's frames; the engine then points
            # at the entry's line (as on the default version)
            if value is not None:
                assert errors[0][key] == value, (key, errors[0])
    else:
        assert errors == [] and events[-1]["status"] == "ok", errors or events[-1]
    # the outputs the default version produced for each pipeline (its golden file)
    # are produced on this one too
    golden = load_golden(case)
    assert golden is not None, f"no golden file for {case}"
    for name, outputs in golden["pipelines"].items():
        wanted = set(outputs) & set(request.outputs)
        got = {e["type"] for e in events if e.get("pipeline", "main") == name}
        missing = wanted - got
        assert not missing, f"jax {version}, pipeline {name}: no {sorted(missing)}"
