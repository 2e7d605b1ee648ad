"""The library set in real jails (sandbox/environments/libraries.py): a Flax NNX training step, an
Equinox MLP's filtered gradient and an Optax schedule (the examples/ files) run
through the engine in a jail show the jaxpr, byte for byte, and the values, by
sha256, that JAX and the libraries called directly in a fresh process give
(tests/golden/reference.py); the zygote imported them before the run; and a run that
patches a library in a kept process is that process's last. Real jail, real JAX."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.environments import libraries
from sandbox.protocol import RunRequest
from tests.gates import skip_without_jail
from tests.support.live_pool import TEST_LIMITS, TEST_POOL, LivePool, Result, make_live_pool

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "golden" / "reference.py"

#: The examples, with the args and transforms their headers suggest.
CASES: dict[str, dict[str, Any]] = {
    "flax_nnx_training_step": {
        "args": "(params, jnp.ones((4, 3)), jnp.zeros((4, 1)))",
        "transforms": [{"name": "jit"}],
    },
    "equinox_mlp_filter_grad": {
        "args": "(params, jnp.ones((5, 2)))",
        "transforms": [{"name": "jit"}],
    },
    "optax_schedule": {
        "args": "jnp.arange(0, 100, 10)",
        "transforms": [{"name": "vmap"}, {"name": "jit"}],
    },
}
#: A loaded machine compiles slowly: these runs may take longer than the hostile
#: suites' 10 s.
LIMITS = dataclasses.replace(TEST_LIMITS, max_wall_s=120.0, memory_bytes=2 * 1024**3)
#: and start zygotes (which import the libraries) slowly
POOL = dataclasses.replace(TEST_POOL, pool_start_s=300.0, pool_spares=1)


@pytest.fixture(scope="module")
def pool() -> Iterator[LivePool]:
    skip_without_jail()
    live = make_live_pool(limits=LIMITS, settings=POOL)
    try:
        yield live
    finally:
        live.close()


@dataclasses.dataclass
class Ran:
    result: Result
    reused: int
    kept: bool


def run(live: LivePool, tenant: str, **request: Any) -> Ran:
    request.setdefault("timeout_s", 110.0)
    req = RunRequest(**request)

    async def go() -> Ran:
        handle = await live.pool.submit(req, tenant)
        events = [e async for e in handle.events()]
        deadline = time.monotonic() + 5.0  # whether it is kept is decided after the run
        while handle.kept is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return Ran(Result(events, 0.0, handle.zygote_id), handle.reused, handle.kept is True)

    result: Ran = live.call(go())
    return result


def case_request(name: str) -> dict[str, Any]:
    code = (ROOT / "examples" / f"{name}.py").read_text()
    return {"code": code, "outputs": ["jaxpr", "value"], **CASES[name]}


def reference(request: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    case = tmp_path / "case.json"
    case.write_text(json.dumps({"request": request}))
    out = subprocess.run(
        [sys.executable, str(REFERENCE), str(case)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    main: dict[str, Any] = json.loads(out.stdout)["pipelines"]["main"]
    return main


LEAF_KEYS = ("path", "shape", "dtype", "sha256")


@pytest.mark.parametrize("name", list(CASES))
def test_a_library_example_shows_what_the_libraries_give_directly(
    pool: LivePool, name: str, tmp_path: Path
) -> None:
    request = case_request(name)
    ran = run(pool, f"lib-{name}", **request)
    assert ran.result.status == "ok", ran.result.events[-3:]
    expected = reference(request, tmp_path)
    (jaxpr,) = ran.result.of("jaxpr")
    assert jaxpr["text"] == expected["jaxpr"]["text"]
    (value,) = ran.result.of("value")
    leaves = [{k: leaf[k] for k in LEAF_KEYS} for leaf in value["tree"]]
    assert leaves == [{k: leaf[k] for k in LEAF_KEYS} for leaf in expected["value"]["tree"]]
    assert len(leaves) > 1 or name == "optax_schedule"  # a model's parameters: a pytree


def test_the_zygote_imported_the_set_before_the_run(pool: LivePool) -> None:
    """What the run's own code finds in ``sys.modules`` before it imports anything."""
    wanted = list(libraries.PRELOADED)
    code = (
        "import sys\n"
        f"print(sorted(m for m in {wanted!r} if m in sys.modules))\n"
        "def f(x):\n    return x\n"
    )
    ran = run(pool, "lib-preimported", code=code, args="(1.0,)", outputs=["value"])
    assert ran.result.status == "ok", ran.result.events[-3:]
    assert ran.result.out.strip() == str(sorted(wanted))


#: Runs that patch a library the zygote imported: each is its kept process's last.
PATCHING = {
    "optax.adam": (
        "import optax\noptax.adam = optax.sgd",
        "import optax\nprint(optax.adam.__name__)",
    ),
    "an nnx.Module class attribute": (
        "from flax import nnx\nnnx.Linear.__call__ = lambda self, x: x",
        "from flax import nnx\nprint(nnx.Linear.__call__.__qualname__)",
    ),
    "equinox.filter_jit": (
        "import equinox as eqx\neqx.filter_jit = lambda fun, **kw: fun",
        "import equinox as eqx\nprint(eqx.filter_jit.__name__)",
    ),
}
PROBE_OUT = {
    "optax.adam": "adam",
    "an nnx.Module class attribute": "Linear.__call__",
    "equinox.filter_jit": "filter_jit",
}
IDENTITY = "\ndef f(x):\n    return x\n"


def kept_run(live: LivePool, tenant: str, code: str) -> Ran:
    """A run whose process is kept for the tenant's next run (a run that found the warm
    child still warming got a cold one, never kept: then the next one is)."""
    deadline = time.monotonic() + 120.0  # a loaded machine warms children slowly
    while True:
        ran = run(live, tenant, code=code + IDENTITY, args="(1.0,)", outputs=["value"])
        assert ran.result.status == "ok", ran.result.events[-3:]
        if ran.kept:
            return ran
        assert time.monotonic() < deadline, "no process kept"
        time.sleep(2.0)


@pytest.mark.parametrize("name", list(PATCHING))
def test_a_run_that_patches_a_library_is_its_process_s_last(pool: LivePool, name: str) -> None:
    patch, probe = PATCHING[name]
    # one patching tenant and one other for every case (each case starts from a process
    # kept for it and checks its own patch): a tenant of its own per case waited for a
    # jail importing JAX and the libraries, twice a case
    tenant = "lib-patch"
    first = kept_run(pool, tenant, probe)
    assert first.result.out.strip() == PROBE_OUT[name]
    bad = run(pool, tenant, code=patch + IDENTITY, args="(1.0,)", outputs=["value"])
    assert bad.reused == first.reused + 1  # it ran in the kept process...
    assert bad.result.status == "ok", bad.result.events[-3:]
    assert not bad.kept  # ...which is not used again
    after = run(pool, tenant, code=probe + IDENTITY, args="(1.0,)", outputs=["value"])
    assert after.reused == 0 and after.result.out.strip() == PROBE_OUT[name]
    other = run(pool, "lib-other", code=probe + IDENTITY, args="(1.0,)", outputs=["value"])
    assert other.result.out.strip() == PROBE_OUT[name]
