"""Eager executables shared between jails by the template's compiler
(sandbox/zygote/eager_compiler.py, eager_link.py, sandbox/engine/core/shared_eager.py),
in real jails: a new tenant's jail gets what another tenant's set-up taught the
compiler, a tenant's kept process stays kept, and a forger writing lies on its report
pipe cannot make another tenant's jail hold anything under a key it claimed."""

from __future__ import annotations

import json
import textwrap
import time
from typing import Any

from sandbox.jail.compile_cache import CACHE_DIR
from tests.support.live_pool import LivePool

#: shapes no other test uses, so the first tenant is the first to compile them
SET_UP = textwrap.dedent("""
    import json, os
    import jax, jax.numpy as jnp
    from sandbox.engine.core import shared_eager
    planted = sorted(os.listdir(CACHE_DIR))  # before the set-up compiles anything
    X = jnp.full((13, 17), 0.25)
    Z = jax.lax.add(X, jnp.ones((13, 17)))
    print(json.dumps({
        "missed": sorted(shared_eager.link.missed), "sum": float(Z.sum()),
        "cache": planted,
    }))
""")


def said(live: LivePool, code: str, tenant: str) -> dict[str, Any]:
    result = live.run(f"CACHE_DIR = {CACHE_DIR!r}\n" + code, tenant=tenant)
    assert result.status == "ok", result.events
    found: dict[str, Any] = json.loads(result.out.strip().splitlines()[-1])
    return found


def test_a_new_tenants_jail_gets_what_another_tenants_set_up_taught_the_compiler(
    shared_pool: LivePool,
) -> None:
    assert all(t.said.get("eager_compiler") for t in shared_pool.pool.jailer.templates if t.alive)
    red = said(shared_pool, SET_UP, "eager-red")
    # a broadcast and an add of these shapes (the scalar's conversion is the seed's:
    # sandbox/zygote/seed.py), compiled here and recorded
    missed = {name.split("-")[0] for name in red["missed"]}
    assert {"jit_broadcast_in_dim", "jit_add"} <= missed, red
    assert red["sum"] == 13 * 17 * 1.25, red
    # its process is kept for its next run: recording changed nothing a kept process
    # is judged by (sandbox/zygote/watch.py, kernel_view.py)
    reused = shared_pool.pool.reused
    said(shared_pool, SET_UP, "eager-red")
    assert shared_pool.pool.reused == reused + 1
    # another tenant's new jail has them written into its cache before its run: it
    # misses none (the compiler learns while nothing waits: a second or so)
    for attempt in range(6):
        blue = said(shared_pool, SET_UP, f"eager-blue-{attempt}")
        if not blue["missed"]:
            break
        time.sleep(1)
    assert blue["missed"] == [] and blue["sum"] == red["sum"], blue
    assert {f"{key}-cache" for key in red["missed"]} <= set(blue["cache"]), blue


FORGER = textwrap.dedent("""
    import json, os
    import jax.numpy as jnp
    from sandbox.engine.core import shared_eager
    # the victim's program compiled here, unrecorded, to learn its key
    shared_eager._state.active = False
    jnp.ones((19, 23)).block_until_ready()
    key = [n[: -len("-cache")] for n in os.listdir(CACHE_DIR)
           if n.startswith("jit_broadcast_in_dim-") and n.endswith("-cache")
           and n not in SEEDED][0]
    lie = shared_eager.Description(
        key, "broadcast_in_dim",
        {"shape": {"t": [19, 24]}, "broadcast_dimensions": {"t": []}, "sharding": None},
        (shared_eager.Aval((), "float32", False),),
    ).to_bytes()
    os.write(shared_eager.link.fd, lie + b"\\ngarbage\\n" + lie + b"\\n")
    print(json.dumps({"key": key}))
""")
VICTIM = textwrap.dedent("""
    import json, os
    import jax.numpy as jnp
    planted = sorted(os.listdir(CACHE_DIR))  # before the set-up compiles anything
    W = jnp.ones((19, 23))
    print(json.dumps({"sum": float(W.sum()), "cache": planted}))
""")


def test_a_forger_cannot_make_another_tenants_jail_hold_a_false_executable(
    shared_pool: LivePool,
) -> None:
    """The forger reports the key of ``jnp.ones((19, 23))``'s broadcast with a
    description of a broadcast to (19, 24), raw, on its jail's report pipe. The
    compiler learns the (19, 24) program under that program's own key: the victim's
    new jail never holds an entry under the claimed key, and its ones are ones."""
    listing = shared_pool.run(f"import os\nprint(os.listdir({CACHE_DIR!r}))", tenant="eager-seed")
    seeded = sorted(eval(listing.out))
    forger = said(shared_pool, f"SEEDED = {seeded!r}\n" + FORGER, "eager-forger")
    time.sleep(2)  # what the compiler learns meanwhile, it learns from the lie
    victim = said(shared_pool, VICTIM, "eager-victim")
    assert victim["sum"] == 19 * 23, victim
    assert f"{forger['key']}-cache" not in victim["cache"], victim
