"""Issue 20 through real jails: pristine runs, tamper-evident runs, fresh randomness
per run, and the worker's identity from the zygote. Real bubblewrap, real JAX."""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
from dataclasses import dataclass
from typing import Any

from sandbox.jail.compile_cache import CACHE_DIR
from sandbox.pool.base import PoolFull
from sandbox.protocol import TAMPERED_REASON, RunRequest
from sandbox.zygote.handle import PRISTINE, Zygote
from sandbox.zygote.run import ZygoteRun
from tests.support.live_pool import LivePool, Result
from tests.zygote.test_reuse import run as tenant_run

#: What a run of a function shows only from the engine's own compile and execute:
#: its value, from the jitted function (compiled through the persistent cache).
SIN_CODE = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x)\n"
SIN: dict[str, Any] = {
    "code": SIN_CODE,
    "args": "(jnp.arange(1.0, 4.0),)",
    "transforms": [{"name": "jit"}],
    "outputs": ["value"],
}


@dataclass
class Pristine:
    result: Result
    handle: ZygoteRun
    zygote: Zygote
    #: the zygote's tenant and runs when the pool chose it
    tenant_then: str | None
    runs_then: int


def pristine(live: LivePool, code: str, **request: Any) -> Pristine:
    """One pristine run, as the server's confirmer asks for it: retried while no spare
    is ready (PoolFull), never waiting in the pool."""
    request.setdefault("outputs", ["jaxpr"])
    request.setdefault("args", "(1.0,)")
    if "def f(" not in code:
        code += "\n\ndef f(x):\n    return x\n"
    req = RunRequest(code=code, **request)

    async def go() -> Pristine:
        deadline = time.monotonic() + 120
        while True:
            try:
                handle = await live.pool.submit_pristine(req, "confirmer")
                break
            except PoolFull:
                assert time.monotonic() < deadline, "no spare for a pristine run in 120 s"
                await asyncio.sleep(0.2)
        z = handle._zygote
        tenant_then, runs_then = z.tenant, z.runs
        events = [e async for e in handle.events()]
        return Pristine(Result(events, 0.0, z.id), handle, z, tenant_then, runs_then)

    return live.call(go())


CACHE_PROBE = f"""
import os, jax, jax.numpy as jnp
from jax._src import compilation_cache as cc
before = sorted(os.listdir({CACHE_DIR!r}))
jnp.cos(jnp.arange(7.0) * 3).block_until_ready()  # a new eager compile
after = sorted(os.listdir({CACHE_DIR!r}))
print('CACHE', jax.config.jax_enable_compilation_cache, jax.config.jax_compilation_cache_dir,
      cc.is_persistent_cache_enabled(), cc._cache_used, after != before)
"""


def test_a_pristine_run_is_a_fresh_child_of_an_unused_spare_and_retires_it(
    live_pool: LivePool,
) -> None:
    tenant = live_pool.run(CACHE_PROBE, tenant="pristine-tenant")
    assert tenant.status == "ok", tenant.events
    # a tenant's run has the jail's cache on, and writes it
    assert f"CACHE True {CACHE_DIR} True True True" in tenant.out, tenant.out
    before = live_pool.pool.stats()["pristine_runs"]

    p = pristine(live_pool, CACHE_PROBE)
    assert p.result.status == "ok", p.result.events
    # a spare that never had a tenant, in a jail that never served a run
    assert p.tenant_then == PRISTINE and p.runs_then == 0
    assert p.zygote.id != tenant.zygote
    # a fresh child, not kept, and the zygote with its jail retired after the run
    assert p.handle.reused == 0 and p.handle.kept is False
    assert p.zygote.state == "retired" and p.zygote not in live_pool.pool.zygotes
    # the persistent cache as in any new tenant's first run (issue 33: nothing tells
    # them apart); it is the spare's own, which only its warm-up wrote, and goes with it
    assert f"CACHE True {CACHE_DIR} True" in p.result.out, p.result.out
    assert live_pool.pool.stats()["pristine_runs"] == before + 1
    # no tenant is ever given the pristine-marked zygote, and none counts it
    assert all(z.tenant != PRISTINE for z in live_pool.pool.zygotes)
    assert live_pool.strays() == []


#: Appended to SIN's code (after f, so f's lines and so its cache key stay the same):
#: when the engine's execute stage compiles f and stores it in the jail's persistent
#: cache, the executable of jnp.cos is stored under f's key instead.
PLANT = """
from jax._src import compilation_cache as _cc
import jax as _jax

_put = _cc.put_executable_and_time

def _plant(cache_key, module_name, executable, backend, *rest):
    if module_name.startswith('jit_f'):
        executable = _jax.jit(jnp.cos).lower(jnp.arange(1.0, 4.0)).compile().runtime_executable()
    return _put(cache_key, module_name, executable, backend, *rest)

_cc.put_executable_and_time = _plant
"""


def _value(result: Result) -> str:
    assert result.status == "ok", result.events
    values = result.of("value")
    assert len(values) == 1, result.events
    return str(values[0]["repr"])


def test_an_executable_planted_in_a_tenant_s_cache_never_reaches_a_pristine_run(
    live_pool: LivePool,
) -> None:
    honest = _value(live_pool.run(SIN_CODE, tenant="plant-honest", **_rest(SIN)))
    assert "0.84147" in honest, honest  # sin(1)
    planted = live_pool.run(SIN_CODE + PLANT, tenant="plant-evil", **_rest(SIN))
    assert _value(planted) == honest  # the planting run itself showed the real one
    # the tenant's next run, a fresh process of the same jail, loads the forgery
    forged = _value(live_pool.run(SIN_CODE, tenant="plant-evil", **_rest(SIN)))
    assert "0.5403" in forged and forged != honest, forged  # cos(1): the attack works
    # a pristine run of the very same request shows JAX's answer
    p = pristine(live_pool, SIN_CODE, **_rest(SIN))
    assert _value(p.result) == honest
    assert p.zygote.state == "retired"


def _rest(request: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k != "code"}


def test_a_forged_jaxpr_written_before_the_engine_s_is_refused_and_the_run_is_tampered(
    live_pool: LivePool,
) -> None:
    forge = textwrap.dedent("""
        import json, os
        line = json.dumps({"type": "jaxpr", "pipeline": "main", "text": "FORGED", "sources": []})
        for fd in range(3, 30):
            try:
                os.write(fd, line.encode() + b"\\n")
            except OSError:
                pass
        import jax.numpy as jnp

        def f(x):
            return jnp.sin(x)
    """)
    result = live_pool.run(forge, tenant="forger")
    jaxprs = result.of("jaxpr")
    assert len(jaxprs) == 1 and "sin" in jaxprs[0]["text"], jaxprs  # the engine's
    assert "FORGED" not in json.dumps(result.events)
    done = result.done
    assert done["status"] == "tampered" and done["dropped"] >= 1, done
    assert done["reason"].startswith(TAMPERED_REASON), done
    # an honest run of the same tenant is ok again
    again = live_pool.run("import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x)\n")
    assert again.status == "ok" and "dropped" not in again.done, again.done


DRAW = "import random, numpy as np\nprint('DRAW', random.random(), np.random.random())\n"


def _draw(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith("DRAW ")]
    assert len(lines) == 1, out
    return lines[0]


def test_each_run_draws_fresh_random_numbers_in_a_kept_process_and_a_fresh_fork(
    live_pool: LivePool,
) -> None:
    first = tenant_run(live_pool, DRAW, "draws-kept")
    assert first.result.status == "ok" and first.kept, first.result.events
    second = tenant_run(live_pool, DRAW, "draws-kept")
    assert second.result.status == "ok" and second.reused >= 1, second.result.events
    assert _draw(first.result.out) != _draw(second.result.out)
    # fresh forks of one zygote (each run changes the recursion limit: not kept)
    taint = DRAW + "import sys\nsys.setrecursionlimit(4321)\n"
    a = tenant_run(live_pool, taint, "draws-fresh")
    b = tenant_run(live_pool, taint, "draws-fresh")
    assert not a.kept and b.reused == 0 and a.result.zygote == b.result.zygote, (a, b)
    assert _draw(a.result.out) != _draw(b.result.out)


#: A run that makes the engine's accepted say another machine, through what the kept
#: process's check does not compare (a method of a class outside its watched
#: families, which every event is written through).
FORGE_WORKER = """
import json.encoder
_encode = json.encoder.JSONEncoder.encode

def encode(self, o):
    if isinstance(o, dict) and o.get('type') == 'accepted':
        o = dict(o, worker=dict(o['worker'], platform='tpu', device_kind='TPU v99', devices=4096))
    return _encode(self, o)

encode.forged = True
json.encoder.JSONEncoder.encode = encode
"""


def test_the_accepted_worker_is_the_zygote_s_whatever_a_kept_process_was_made_to_say(
    live_pool: LivePool,
) -> None:
    first = tenant_run(live_pool, FORGE_WORKER, "identity")
    assert first.result.status == "ok" and first.kept, first.result.events
    check = "import json.encoder\nprint('FORGED', getattr(json.encoder.JSONEncoder.encode, 'forged', False))"
    second = tenant_run(live_pool, check, "identity")
    assert second.result.status == "ok" and second.reused >= 1, second.result.events
    assert "FORGED True" in second.result.out  # the patch is still there...
    accepted = second.result.of("accepted")[0]
    zygote = next(z for z in live_pool.pool.zygotes if z.id == second.result.zygote)
    assert zygote.info is not None and zygote.info.worker is not None
    hello = zygote.info.worker
    assert hello["platform"] == "cpu" and hello["device_kind"] == "cpu", hello
    assert "flax" in hello["libraries"], hello  # the hello's libraries too, not the run's
    # ...but the worker relayed is what the zygote said before any run
    assert accepted["worker"] == dict(hello, devices=1), accepted
    assert first.result.of("accepted")[0]["worker"] == accepted["worker"]
