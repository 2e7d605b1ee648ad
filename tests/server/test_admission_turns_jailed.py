"""Turns at a full pool with the real jailed pool: a new tenant is refused while both
zygotes serve tenants that use them (no eviction), and gets one once a holder's turn
is over (that holder's zygote retires at once)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.app.core.errors import Overloaded
from backend.app.core.metrics import Metrics
from backend.app.tenancy.admission import Admission
from backend.app.tenancy.caller import Caller
from sandbox.pool.settings import PoolSettings
from sandbox.protocol import RunRequest
from tests.support.live_pool import LivePool, make_live_pool

from .conftest import make_settings

TWO = PoolSettings(pool_size=2, pool_spares=1, pool_running=1, pool_per_tenant=1)


@pytest.fixture(scope="module")
def two_zygotes() -> Iterator[LivePool]:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    live = make_live_pool(settings=TWO)
    try:
        yield live
    finally:
        live.close()


def test_a_full_pool_takes_a_new_tenant_by_turns(two_zygotes: LivePool, tmp_path: Path) -> None:
    pool = two_zygotes.pool
    metrics = Metrics()
    admission = Admission(
        make_settings(tmp_path, tenant_turn_s=600.0, tenant_idle_s=60.0, queue_timeout_s=60.0),
        metrics,
    )
    request = RunRequest.model_validate(
        {"code": "def f(x):\n    return x * 2\n", "args": "(1.0,)", "outputs": ["jaxpr"]}
    )

    def run(tenant: str) -> str:
        async def go() -> str:
            ticket = admission.enter(Caller(tenant=tenant, rate_key=tenant, client=tenant), "cpu")
            try:
                handle = await admission.submit(pool, request, ticket)
                events = [e async for e in handle.events()]
            finally:
                admission.release(ticket)
            assert events[-1]["status"] == "ok", events[-1]
            return str(handle.zygote_id)  # type: ignore[attr-defined]

        return str(two_zygotes.call(go()))

    assert pool.tenant_slots == 2
    a, b = run("a"), run("b")
    retired = pool.retired
    with pytest.raises(Overloaded) as refused:
        run("c")
    assert refused.value.status == 503 and (refused.value.retry_after_s or 0) >= 1
    assert metrics.rejected.labels("tenants")._value.get() == 1
    assert (run("a"), run("b")) == (a, b)  # nobody's zygote was evicted for c
    assert pool.retired == retired

    admission.turns.turn_s = 0.0  # turns are over now, while c waits
    with pytest.raises(Overloaded):
        run("a")
    assert metrics.rejected.labels("turn")._value.get() == 1
    assert a not in {z.id for z in pool.zygotes}  # retired at once, for c
    c = run("c")
    assert c not in (a, b)
    with pytest.raises(Overloaded):  # b's turn is over too, and a waits
        run("b")
    assert run("a") not in (a, b, c)
