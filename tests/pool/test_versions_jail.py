"""Every installed JAX version through the real jail: one representative request each.

The default version (jaxplay's own environment) and each version installed under
``JAXPLAY_JAX_VERSIONS_DIR`` (``jaxplay versions add``) run a grad-of-jit pipeline
with every deterministic output, and a pmap over two CPU devices, in their own
version's jailed warm pool (sandbox/pool/versioned.py). This probes the engine's
version adapters (sandbox/engine/core/compat.py): device count, cost analysis, source maps.
CI installs at least one older version (JAXPLAY_JAX_VERSIONS in .ci/run), and there a
run with none installed fails instead of skipping.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.environments.versions import default_version, installed, version_key
from sandbox.jail.jail import Jailer
from sandbox.pool.settings import PoolSettings
from sandbox.pool.versioned import VersionedPool
from sandbox.pool.zygote_pool import ZygotePool
from sandbox.protocol import RunRequest
from tests.support.live_pool import TEST_LIMITS, needs_bwrap

ROOT = Path(__file__).resolve().parents[2]
VERSIONS_DIR = Path(os.environ.get("JAXPLAY_JAX_VERSIONS_DIR") or ROOT / ".jaxplay" / "versions")
DEFAULT = default_version()
OTHERS = [v for v, env in installed(VERSIONS_DIR).items() if not env.default]

CODE = """\
import jax
import jax.numpy as jnp


def f(x):
    y = jnp.tanh(x * 2.0)
    return jnp.sum((y - 0.5) ** 2)


def g(x):
    return jax.lax.psum(x, "i")
"""
OUTPUTS = ["jaxpr", "stablehlo", "hlo", "value", "cost"]


def test_ci_installs_an_older_version() -> None:
    if not OTHERS:
        message = f"no JAX version besides the default installed in {VERSIONS_DIR}"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must install one (JAXPLAY_JAX_VERSIONS)")
        pytest.skip(f"{message} (jaxplay versions add 0.10.2)")


class Versions:
    """A versioned jailed pool on its own event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        settings = PoolSettings(pool_size=4, pool_running=1, pool_spares=0, pool_per_tenant=1)
        assert DEFAULT is not None
        self.pool = VersionedPool(
            ZygotePool(Jailer(TEST_LIMITS), settings),
            default_version=DEFAULT,
            versions_dir=VERSIONS_DIR,
        )
        self.loop.run_until_complete(self.pool.start())

    def run(self, **request: Any) -> list[dict[str, Any]]:
        async def go() -> list[dict[str, Any]]:
            handle = await self.pool.submit(RunRequest(**request), "t")
            return [e async for e in handle.events()]

        return self.loop.run_until_complete(asyncio.wait_for(go(), 120))

    def close(self) -> None:
        self.loop.run_until_complete(self.pool.close())
        self.loop.close()


@pytest.fixture(scope="module")
def versions() -> Iterator[Versions]:
    live = Versions()
    yield live
    live.close()


def _one(events: list[dict[str, Any]], kind: str, pipeline: str = "main") -> dict[str, Any]:
    found = [e for e in events if e["type"] == kind and e.get("pipeline", "main") == pipeline]
    assert len(found) == 1, (kind, [e["type"] for e in events])
    return found[0]


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("version", [DEFAULT, *OTHERS])
def test_a_version_runs_the_whole_pipeline_in_the_jail(versions: Versions, version: str) -> None:
    events = versions.run(
        code=CODE,
        args="(jnp.ones((3,)),)",
        transforms=[{"name": "grad"}, {"name": "jit"}],
        outputs=OUTPUTS,
        jax_version=version,
    )
    done = events[-1]
    assert done["type"] == "done" and done["status"] == "ok", events[-3:]
    assert not [e for e in events if e["type"] == "error"]
    assert _one(events, "accepted")["worker"]["jax_version"] == version
    for kind in ("jaxpr", "stablehlo", "hlo"):
        event = _one(events, kind)
        assert event["text"].strip(), kind
        lines = {s["line"] for s in event["sources"]}
        assert lines and lines <= {6, 7}, (kind, event["sources"])  # the lines of f's body
    cost = _one(events, "cost")
    assert cost["flops"] and cost["flops"] > 0
    leaf = _one(events, "value")["tree"][0]
    t = math.tanh(2.0)
    expected = 2 * (t - 0.5) * (1 - t * t) * 2.0
    assert leaf["shape"] == [3] and leaf["dtype"] == "float32"
    assert leaf["data"] == pytest.approx([expected] * 3, rel=1e-5)


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("version", [DEFAULT, *OTHERS])
def test_a_version_runs_pmap_on_two_cpu_devices(versions: Versions, version: str) -> None:
    events = versions.run(
        code=CODE,
        entry="g",
        args="(jnp.arange(2.0),)",
        transforms=[{"name": "pmap", "axis_name": "i"}],
        outputs=["jaxpr", "value"],
        devices=2,
        jax_version=version,
    )
    assert events[-1]["status"] == "ok", events[-3:]
    assert _one(events, "accepted")["worker"]["devices"] == 2
    assert _one(events, "value")["tree"][0]["data"] == [1.0, 1.0]


@needs_bwrap
@pytest.mark.slow
def test_across_the_installed_versions_every_output_is_there(versions: Versions) -> None:
    """The across-versions comparison (backend/app/relay/compare.py) on real runs: every
    output of every version present, and the times table filled."""
    from backend.app.relay.compare import changes, summarize, times

    if not OTHERS:
        pytest.skip("one version installed: nothing to compare")
    runs = []
    for version in sorted([DEFAULT, *OTHERS], key=version_key):
        events = versions.run(
            code=CODE,
            args="(jnp.ones((3,)),)",
            transforms=[{"name": "grad"}, {"name": "jit"}],
            outputs=OUTPUTS,
            jax_version=version,
        )
        runs.append(summarize(version, events))
    assert all(r.status == "ok" and r.jax_version == r.version for r in runs)
    compared = changes(runs)
    assert {c["output"] for c in compared} == set(OUTPUTS)
    assert all(c["missing"] == [] for c in compared), compared
    for c in compared:
        for step in c["changes"]:
            assert step["diff"].startswith(f"--- {step['from']}\n+++ {step['to']}")
    assert all(row["compile_ms"] is not None for row in times(runs))
