"""Issue 33 through real jails: code a person did not write never runs in a process
that serves them later (single-use tenants), pristine runs look like any run to their
code, and never cost an active tenant its warm process. Real bubblewrap, real JAX.

The attacker's code here is what a shared link could hold: each attack first shows
that it works where it may (in a process kept for the tenant that ran it), then that
a victim whose link run was single-use sees what a clean fresh process shows, by
``repr`` and by the leaves' hashes (an attack can rewrite either)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.jail.compile_cache import CACHE_DIR
from sandbox.pool.base import PoolFull
from sandbox.pool.settings import PoolSettings
from sandbox.protocol import RunRequest
from sandbox.protocol.tenants import single_use
from tests.gates import skip_without_jail
from tests.pool.test_pristine import pristine
from tests.support.live_pool import LivePool, Result, make_live_pool
from tests.zygote.test_reuse import Ran, run

EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "grad_of_loss.py").read_text()
#: the page's default example as it sends it: grad then jit, the value shown
GRAD: dict[str, Any] = {
    "args": "(jnp.ones((3,)),)",
    "transforms": [{"name": "grad"}, {"name": "jit"}],
    "outputs": ["value"],
}
CLEAN_REPR = "Array([ 0.04089159, -0.08178318,  0.16356637], dtype=float32)"  # JAX's answer
FORGED = "[7. 7. 7.]"

#: What a link could hold (each prints a fresh draw, so no two readers' runs agree and
#: every reader runs it): the issue's rule-table change (tanh's JVP, three times the
#: tangent: [0.1227, -0.2453, 0.4907]), and one the after-run check cannot see (the
#: JSON encoder's method, outside the watched classes).
ATTACKS = {
    "tanh's jvp rule": """
import os
from jax._src.interpreters import ad
from jax._src.lax import lax as _lax
def _wrong(primals, tangents, **params):
    (x,), (t,) = primals, tangents
    y = _lax.tanh_p.bind(x, **params)
    return y, t * (1 - y * y) * 3.0
ad.primitive_jvps[_lax.tanh_p] = _wrong
getattr(ad, "primitive_linearizations", {}).pop(_lax.tanh_p, None)
print(os.urandom(4).hex())
""",
    "json encoder": f"""
import os
import json.encoder as E
_encode = E.JSONEncoder.encode
def _forge(self, o):
    if isinstance(o, dict) and o.get("type") == "value":
        o = dict(o, repr={FORGED!r})
    return _encode(self, o)
E.JSONEncoder.encode = _forge
print(os.urandom(4).hex())
""",
}


def grad_run(live: LivePool, tenant: str, code: str = EXAMPLE) -> Ran:
    ran = run(live, code, tenant, **GRAD)
    assert ran.result.status == "ok", ran.result.events
    return ran


def shown(result: Result) -> tuple[str, list[str | None]]:
    """The value as the person sees it: its repr, and each leaf's hash."""
    values = result.of("value")
    assert len(values) == 1, result.events
    return str(values[0]["repr"]), [leaf.get("sha256") for leaf in values[0]["tree"]]


def kept(live: LivePool, tenant: str) -> Ran:
    """The default example's run in a process kept for ``tenant`` (a cold first child
    is never kept: the next is)."""
    for attempt in range(5):
        ran = grad_run(live, tenant)
        if ran.kept:
            return ran
        time.sleep(0.5 * (attempt + 1))
    raise AssertionError(f"no process kept for {tenant}: {ran.result.events[-1]}")


@pytest.fixture(scope="module")
def clean(live_pool: LivePool) -> tuple[str, list[str | None]]:
    """What a clean fresh process shows for the default example."""
    ran = grad_run(live_pool, "single-use-clean")
    assert ran.reused == 0
    value = shown(ran.result)
    assert value[0] == CLEAN_REPR and all(value[1]), value
    return value


def test_an_attack_works_in_a_process_kept_for_its_own_tenant(
    live_pool: LivePool, clean: tuple[str, list[str | None]]
) -> None:
    """The control: the JSON attack, run as a tenant's own code, forges what that
    tenant's later runs of the default example show (the after-run check cannot see
    it); tanh's JVP rule is seen by the check now (its process is not kept)."""
    tenant = "single-use-control"
    kept(live_pool, tenant)
    attack = grad_run(live_pool, tenant, EXAMPLE + ATTACKS["json encoder"])
    assert attack.kept
    after = grad_run(live_pool, tenant)
    assert after.reused == attack.reused + 1 and shown(after.result)[0] == FORGED
    tanh = grad_run(live_pool, "single-use-control-tanh", EXAMPLE + ATTACKS["tanh's jvp rule"])
    assert "0.12267477" in shown(tanh.result)[0]  # the link's own run shows its forgery
    assert not tanh.kept  # the rule table's change is seen (watch.RuleTables)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_link_s_run_is_single_use_and_the_reader_sees_a_clean_answer(
    live_pool: LivePool, clean: tuple[str, list[str | None]], attack: str
) -> None:
    reader = f"addr:203.0.113.5|session:reader-{attack.split()[0]}"
    before = kept(live_pool, reader)
    assert shown(before.result) == clean
    used = live_pool.pool.stats()["single_use_runs"]
    # The reader opens the link: its code runs as a single-use tenant of the reader's
    link = grad_run(live_pool, single_use(reader), EXAMPLE + ATTACKS[attack])
    assert link.result.zygote != before.result.zygote and link.reused == 0
    gone = [z for z in live_pool.pool.zygotes if z.id == link.result.zygote]
    assert gone == [], gone  # retired after its one run: never kept, never a spare
    assert live_pool.pool.stats()["single_use_runs"] == used + 1
    # ... then runs the default example: in its own kept process, untouched
    after = grad_run(live_pool, reader)
    assert after.result.zygote == before.result.zygote and after.reused == before.reused + 1
    assert shown(after.result) == clean
    assert live_pool.strays() == []


#: What a run's code can read of how it is run: the engine's frames and the keys of
#: the dicts they hold (the worker message among them), JAX's configuration, its
#: persistent cache, the environment. Nothing in it differs between two fresh runs.
PROBE = f"""
import os, sys, jax
from jax._src import compilation_cache as _cc
_frames = []
_f = sys._getframe()
while _f is not None:
    _dicts = [v for v in _f.f_locals.values() if isinstance(v, dict)]
    _frames.append((_f.f_code.co_name, sorted(_f.f_locals),
                    sorted(k for d in _dicts for k in list(d) if isinstance(k, str))))
    _f = _f.f_back
print('FRAMES', _frames[1:])
print('CONFIG', sorted((k, repr(h.value)) for k, h in jax.config._value_holders.items()))
print('CACHE', jax.config.jax_enable_compilation_cache, jax.config.jax_compilation_cache_dir,
      _cc.is_persistent_cache_enabled(), os.path.isdir({CACHE_DIR!r}))
print('ENV', sorted(os.environ.items()))
print('ARGV', len(sys.argv), sys.flags)  # its values: the zygote's descriptors, any zygote's
"""


def _probe(out: str) -> list[str]:
    lines = [
        line
        for line in out.splitlines()
        if line.split(" ", 1)[0] in ("FRAMES", "CONFIG", "CACHE", "ENV", "ARGV")
    ]
    assert len(lines) == 5, out
    return lines


def test_a_pristine_run_looks_like_a_new_tenant_s_first_run(live_pool: LivePool) -> None:
    tenant = live_pool.run(PROBE, tenant="single-use-probe")
    assert tenant.status == "ok", tenant.events
    p = pristine(live_pool, PROBE)
    assert p.result.status == "ok", p.result.events
    assert p.zygote.state == "retired"
    mine, theirs = _probe(tenant.out), _probe(p.result.out)
    assert mine == theirs
    # the persistent cache is the jail's own in both (its spare's warm-up wrote it)
    assert mine[2] == f"CACHE True {CACHE_DIR} True True", mine[2]


@pytest.fixture
def small_pool() -> Iterator[LivePool]:
    """Three places, one spare: full once three tenants hold one each."""
    skip_without_jail()
    live = make_live_pool(
        settings=PoolSettings(
            pool_size=3,
            pool_running=2,
            pool_spares=1,
            pool_per_tenant=1,
            pool_spare_after_idle_s=600.0,
        )
    )
    try:
        yield live
    finally:
        live.close()


def test_a_pristine_run_never_evicts_an_active_tenant(small_pool: LivePool) -> None:
    live = small_pool
    first = pristine(live, "x = 1")  # a ready spare, retired after
    assert first.result.status == "ok" and first.zygote.state == "retired"
    holders: dict[str, str] = {}
    for name in ("a", "b", "c"):
        live.call(live.pool.ready(timeout_s=180))
        ran = kept(live, f"addr:198.51.100.{len(holders) + 1}|session:{name}")
        holders[name] = ran.result.zygote
    # the pool is full of tenants, none idle for pool_spare_after_idle_s: no spare
    # starts, and a pristine run finds none ready
    request = RunRequest.model_validate({"code": "def f(x):\n    return x\n"})
    for _ in range(8):  # 4 s: long enough for a spare to start had a tenant given way
        with pytest.raises(PoolFull):
            live.call(live.pool.submit_pristine(request, "c"))
        live.call(asyncio.sleep(0.5))
    alive = {z.id: z for z in live.pool.zygotes}
    for name, zid in holders.items():
        assert zid in alive and alive[zid].state == "idle", (name, live.pool.zygotes)
    # and each tenant's next run is served by the process it kept
    for name, zid in holders.items():
        again = grad_run(live, f"addr:198.51.100.{list(holders).index(name) + 1}|session:{name}")
        assert again.result.zygote == zid and again.reused >= 1, again
