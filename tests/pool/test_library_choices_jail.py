"""A request's alternative library version through the real jail (sandbox/environments/library_choices.py).

One versioned jailed pool: a run that asks for the committed alternative (optax 0.2.6 on
the default JAX) imports that version, from its overlay, and its ``accepted`` says so
(the zygote's hello, before any run); the same tenant's next run, asking for nothing,
imports the default set's version and ``accepted`` says that. The overlay is what
``make setup`` installs (.jaxplay/libs); CI runs setup, so there a missing one fails.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from sandbox.environments import libraries, library_choices
from sandbox.environments.versions import default_version
from sandbox.jail.jail import Jailer
from sandbox.pool.settings import PoolSettings
from sandbox.pool.versioned import VersionedPool
from sandbox.pool.zygote_pool import ZygotePool
from sandbox.protocol import RunRequest
from tests.support.live_pool import TEST_LIMITS, needs_bwrap

ROOT = Path(__file__).resolve().parents[2]
VERSION = default_version()
CODE = """\
import optax

print(optax.__version__, optax.__file__)


def f(x):
    return x * 2.0
"""


@needs_bwrap
@pytest.mark.slow
def test_a_run_imports_the_version_it_asked_for_and_accepted_says_it() -> None:
    assert VERSION is not None
    alts = [a for a in library_choices.listed(VERSION) if a.name == "optax"]
    if not alts or not library_choices.is_installed(VERSION, alts[0]):
        message = f"no optax alternative installed for jax {VERSION} in {library_choices.LIBS}"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: make setup installs it")
        pytest.skip(f"{message} (.venv/bin/python -m sandbox.environments.library_choices)")
    alt = alts[0]
    default = libraries.installed_here()["optax"]
    assert alt.version != default
    settings = PoolSettings(pool_size=2, pool_running=1, pool_spares=0, pool_per_tenant=2)
    pool = VersionedPool(
        ZygotePool(Jailer(TEST_LIMITS), settings),
        default_version=VERSION,
        versions_dir=ROOT / ".jaxplay" / "versions",
    )

    async def run(**extra: Any) -> list[dict[str, Any]]:
        request = RunRequest(code=CODE, args="(1.0,)", outputs=["value"], **extra)
        handle = await pool.submit(request, "t")
        return [e async for e in handle.events()]

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        await pool.start()
        try:
            chosen = await asyncio.wait_for(run(libraries={"optax": alt.version}), 180)
            plain = await asyncio.wait_for(run(), 180)
            return chosen, plain
        finally:
            await pool.close()

    chosen, plain = asyncio.run(scenario())
    for events in (chosen, plain):
        assert events[-1]["type"] == "done" and events[-1]["status"] == "ok", events[-3:]
    said = [e["text"] for e in chosen if e["type"] == "stdout"]
    overlay = library_choices.overlay_dir(VERSION, alt)
    assert said and said[0].split()[0] == alt.version, said
    assert said[0].split()[1].startswith(f"{overlay}/optax/"), said
    assert chosen[0]["worker"]["libraries"]["optax"] == alt.version
    said = [e["text"] for e in plain if e["type"] == "stdout"]
    assert said and said[0].split()[0] == default, said
    assert str(overlay) not in said[0]
    assert plain[0]["worker"]["libraries"]["optax"] == default
