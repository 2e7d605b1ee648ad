"""The ``export`` output's round trip through the real jail: the artifact deserialized
and called in a fresh Python process started inside the run's own jail (its seccomp
filter, namespaces and limits), on every installed JAX version whose environment has
``flatbuffers``; where it has not, the event says so plainly. ``recompiles`` through the
jail too (its sys.monitoring hook and JAX's logs work under the jail's filter)."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.environments.versions import installed
from tests.pool.test_versions_jail import DEFAULT, OTHERS, VERSIONS_DIR, Versions
from tests.support.live_pool import needs_bwrap

CODE = """\
import jax
import jax.numpy as jnp

k = jax.jit(lambda x: x * 2)
for n in (3, 4, 4):
    k(jnp.ones(n))


def f(x):
    return jnp.concatenate([x, jnp.tanh(x)], 1)
"""


@pytest.fixture(scope="module")
def versions() -> Iterator[Versions]:
    live = Versions()
    yield live
    live.close()


def _serializes(version: str) -> bool:
    python = installed(VERSIONS_DIR)[version].python
    return (
        subprocess.run(
            [python, "-c", "import flatbuffers"], capture_output=True, check=False
        ).returncode
        == 0
    )


def _the(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    assert events[-1]["type"] == "done" and events[-1]["status"] == "ok", events[-3:]
    (event,) = [e for e in events if e["type"] == kind]
    return event


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("version", [DEFAULT, *OTHERS])
def test_the_round_trip_runs_in_the_jail(versions: Versions, version: str) -> None:
    events = versions.run(
        code=CODE,
        args="(jnp.arange(12.0).reshape(4, 3),)",
        transforms=[{"name": "jit"}],
        outputs=["export", "recompiles"],
        export_shapes=["b, 3"],
        jax_version=version,
    )
    export = _the(events, "export")
    assert export["in_avals"] == ["float32[b,3]"] and export["out_avals"] == ["float32[b,6]"]
    if _serializes(version):
        assert base64.b64decode(export["artifact"])
        arguments, fitted = export["roundtrip"]
        assert arguments["inputs"] == ["float32[4,3]"] and arguments["equal"] is True
        assert fitted["inputs"] == ["float32[5,3]"] and fitted["equal"] is True
    else:
        assert export["roundtrip"] == [] and any("flatbuffers" in n for n in export["notes"])
    sites = {(s["line"], s["function"]): s for s in _the(events, "recompiles")["sites"]}
    assert sites[(6, "<lambda>")]["miss_count"] == 2
