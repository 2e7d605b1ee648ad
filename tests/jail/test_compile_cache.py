"""The tenant's compilation cache (sandbox/jail/compile_cache.py) keeps the jail's
promises: it is the tenant's own, and whatever a run does to it (or to jax, its
config, threads) the next run of the same tenant shows what a fresh one would."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path
from typing import Any

from sandbox.jail.compile_cache import CACHE_DIR
from sandbox.zygote.eager_compiler import PREFIX
from tests.jail.test_hostile import PRELUDE
from tests.support.live_pool import LivePool

#: Eager operations (each compiled, so each a cache entry) and a pipeline whose
#: every shown output must not depend on the cache.
SHOWN: dict[str, Any] = {
    "code": "import jax.numpy as jnp\n\ndef f(w, x):\n    return jnp.sum(jnp.tanh(x @ w) ** 2)\n",
    "args": "(jnp.ones((5, 3)) * 0.5, jnp.arange(10.0).reshape(2, 5))",
    "transforms": [{"name": "grad"}, {"name": "jit"}],
    "outputs": ["jaxpr", "stablehlo", "hlo", "value", "cost"],
}
VOLATILE = {"ms", "run_id", "seq"}


def shown(live: LivePool, tenant: str) -> list[dict[str, Any]]:
    result = live.run(
        SHOWN["code"], tenant=tenant, **{k: v for k, v in SHOWN.items() if k != "code"}
    )
    assert result.status == "ok", result.events
    assert result.out == "", result.out  # no word about the cache, ever
    return [
        {k: v for k, v in e.items() if k not in VOLATILE}
        for e in result.events
        if e["type"] in ("jaxpr", "stablehlo", "hlo", "value", "cost")
    ]


def entries(live: LivePool, tenant: str) -> set[str]:
    r = live.run(f"import os\nprint(sorted(os.listdir({CACHE_DIR!r})))", tenant=tenant)
    assert r.status == "ok", r.events
    return set(eval(r.out))


def test_cache_fills_and_stays_with_its_tenant(shared_pool: LivePool) -> None:
    """A tenant's runs fill its cache and find it again; another tenant never sees it."""
    first = shown(shared_pool, "cache-red")
    mine = entries(shared_pool, "cache-red")
    assert any(name.endswith("-cache") for name in mine), mine
    plant = shared_pool.run(
        f"open({CACHE_DIR!r} + '/planted-by-red-cache', 'wb').write(b'junk')", tenant="cache-red"
    )
    assert plant.status == "ok", plant.events
    assert "planted-by-red-cache" in entries(shared_pool, "cache-red")  # it is kept...
    theirs = entries(shared_pool, "cache-blue")
    assert "planted-by-red-cache" not in theirs  # ...for its own tenant only
    assert shown(shared_pool, "cache-blue") == first
    assert shown(shared_pool, "cache-red") == first  # the junk entry changes nothing


def test_a_run_that_corrupts_the_cache_and_jax(shared_pool: LivePool) -> None:
    """Run A overwrites every cache entry, patches jax.numpy.sum, sets config flags and
    leaves a thread running: the next run of the same tenant shows what a fresh
    tenant's does."""
    fresh = shown(shared_pool, "cache-fresh")
    shown(shared_pool, "cache-bad")  # fills the cache with these very computations
    a = shared_pool.run(
        textwrap.dedent(f"""
        import os, threading, time, jax, jax.numpy as jnp
        for name in os.listdir({CACHE_DIR!r}):
            with open(os.path.join({CACHE_DIR!r}, name), 'r+b') as f:
                f.write(b'\\x00garbage' * 64)
        jnp.sum = lambda *a, **k: 42
        jax.numpy.tanh = jnp.sin
        jax.config.update('jax_enable_x64', True)
        jax.config.update('jax_disable_jit', True)
        jax.config.update('jax_compilation_cache_dir', '/tmp/elsewhere')
        threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()
        print('corrupted', len(os.listdir({CACHE_DIR!r})))
        """),
        tenant="cache-bad",
    )
    assert a.status == "ok" and "corrupted" in a.out and "corrupted 0" not in a.out, a.events
    assert shown(shared_pool, "cache-bad") == fresh
    b = shared_pool.run(
        PRELUDE
        + textwrap.dedent("""
        import threading, jax, jax.numpy as jnp
        must('jnp.sum is jax\\'s', jnp.sum(jnp.ones(3)) == 3)
        must('x64 off', not jax.config.jax_enable_x64)
        must('jit on', not jax.config.jax_disable_jit)
        must('one thread of mine', threading.active_count() == 1, threading.active_count())
        """),
        tenant="cache-bad",
    )
    assert b.status == "ok" and "LEAK" not in b.out and b.out.count("SAFE") == 4, b.out


def test_a_run_that_fills_or_breaks_the_cache(shared_pool: LivePool) -> None:
    """Links, directories, foreign names, a full mount, a locked directory: the
    zygote empties the cache, the jail lives on, the next run is as if fresh."""
    fresh = shown(shared_pool, "cache-fresh2")
    shown(shared_pool, "cache-full")
    d = CACHE_DIR
    for planting in (
        f"os.symlink('/tmp', {d!r} + '/link-cache')",
        f"os.makedirs({d!r} + '/sub-cache/deeper')",
        f"open({d!r} + '/not a cache entry', 'w').write('x')",
        # (a kept process compiles little again: the cache may hold no entry to link)
        f"open({d!r} + '/one-cache', 'wb').write(b'x')\n"
        f"os.link({d!r} + '/one-cache', {d!r} + '/twin-cache')",
        # fill the mount (one file may not pass RLIMIT_FSIZE)
        f"for i in range(4):\n"
        f"    try: open({d!r} + f'/big{{i}}-cache', 'wb').write(b'0' * (15 << 20))\n"
        f"    except OSError: pass",
        f"os.chmod({d!r}, 0)",
    ):
        a = shared_pool.run(f"import os\n{planting}\nprint('planted')", tenant="cache-full")
        assert a.status == "ok" and "planted" in a.out, (planting, a.events)
        after = shared_pool.run(
            textwrap.dedent(f"""
            import os, stat
            st = os.lstat({d!r})
            assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700, st
            names = os.listdir({d!r})
            odd = ('link-cache', 'sub-cache', 'twin-cache', 'big0-cache', 'big1-cache')
            assert all(n.endswith('-cache') and n not in odd for n in names), names
            assert all(os.lstat(os.path.join({d!r}, n)).st_nlink == 1 for n in names), names
            print('sane')
            """),
            tenant="cache-full",
        )
        assert after.status == "ok" and "sane" in after.out, (planting, after.events)
        assert after.zygote == a.zygote  # the same jail: emptied, not retired
        assert shown(shared_pool, "cache-full") == fresh, planting


#: The cache's entries in a run of a jail: name -> (its content's hash, its time in ns).
LISTING = textwrap.dedent(f"""
    import hashlib, os
    d = {CACHE_DIR!r}
    def seen(name):
        path = os.path.join(d, name)
        with open(path, 'rb') as f:
            return hashlib.sha256(f.read()).hexdigest(), os.stat(path).st_mtime_ns
    print({{name: seen(name) for name in sorted(os.listdir(d))}})
""")


def listing(live: LivePool, tenant: str) -> dict[str, tuple[str, int]]:
    r = live.run(LISTING, tenant=tenant)
    assert r.status == "ok", r.events
    found: dict[str, tuple[str, int]] = eval(r.out)
    return found


def test_every_jail_starts_with_its_templates_warm_up_entries_each_its_own_copy(
    shared_pool: LivePool,
) -> None:
    """The warm-ups' compiles are made once, by the template's seed (sandbox/zygote/
    seed.py), and written into each new jail's own cache before its first warm child:
    two new tenants' first runs find the same entries, of one content and one time,
    and nothing more but what the template's eager compiler learnt, with its time
    (each warm-up loaded its entry instead of compiling it). What a tenant writes over
    its copy stays in its jail: the next new jail has the template's."""
    seeded = [t.said.get("seeded") for t in shared_pool.pool.jailer.templates if t.alive]
    # the warm-up request's args, jnp.ones((2,)): its fill value's conversion and its
    # broadcast (the request's own compile bypasses the cache, as every run's does)
    assert seeded and all(n is not None and n >= 2 for n in seeded), seeded
    red, blue = listing(shared_pool, "seed-red"), listing(shared_pool, "seed-blue")
    # the compiler may have learnt more between the two: what both hold is the same
    assert all(blue.get(name) == entry for name, entry in red.items()), (red, blue)
    # the compiler's entries come with its files' times; the rest are the seed's
    learnt = {
        (p.name, p.stat().st_mtime_ns)
        for p in Path(tempfile.gettempdir()).glob(f"{PREFIX}*/*-cache")
    }
    seed = {name for name, (_, made) in red.items() if (name, made) not in learnt}
    assert len(seed) == max(seeded), (red, learnt)
    warm_ups = ("jit_broadcast_in_dim-", "jit_convert_element_type-")
    assert all(any(name.startswith(w) for name in red) for w in warm_ups), red
    spoil = shared_pool.run(
        textwrap.dedent(f"""
        import os
        for name in os.listdir({CACHE_DIR!r}):
            with open(os.path.join({CACHE_DIR!r}, name), 'r+b') as f:
                f.write(b'\\x00forged' * 64)
        print('spoiled')
        """),
        tenant="seed-red",
    )
    assert spoil.status == "ok" and "spoiled" in spoil.out, spoil.events
    assert listing(shared_pool, "seed-red") != red  # its own copy, spoiled...
    for tenant in ("seed-blue", "seed-green"):  # ...not another's, nor the next jail's
        theirs = listing(shared_pool, tenant)
        assert all(theirs.get(name) == entry for name, entry in red.items()), theirs
