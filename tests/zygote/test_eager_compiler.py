"""The template's eager compiler (sandbox/zygote/eager_compiler.py), a zygote's link to
it (eager_link.py) and a run's records (sandbox/engine/core/shared_eager.py), outside
any jail: a jail's cache gets what the compiler learnt from another jail's run, never
what a description claims, and a hostile connection burdens no one but itself. (In
real jails, two tenants and a forger: tests/jail/test_eager_sharing.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sandbox.engine.core.shared_eager import TABLE, Aval, Description, Unshareable
from sandbox.zygote.eager_compiler import LEARN_PER_JAIL, PREFIX

ROOT = Path(__file__).resolve().parents[2]

#: A template's start as template_main.py makes it (one CPU, JAX imported and warmed,
#: no backend), its compiler, then the scenario (``sys.argv[1]``, one of the functions
#: ``sys.argv[2]`` puts in CASES); it prints one JSON line.
TEMPLATE = r"""
import json, os, socket, sys, tempfile, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from sandbox.engine import api
api.prepare()
from jax._src import xla_bridge
from sandbox.zygote import eager_compiler
from sandbox.zygote.eager_link import EagerLink
from sandbox.engine.core import shared_eager

compiler = eager_compiler.start()


def jail(code, before=None):
    '''A child as a jail would be, its zygote's part and its run's in one process: its
    own cache directory and link, what the compiler learnt planted, the hooks, a
    backend; ``code`` run as a run's set-up, reported, passed on. ``before``: called
    once the jail's connection is made.'''
    fd = compiler.connection()
    if before is not None:
        before()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        from sandbox.engine.core import persistent_cache
        local = tempfile.mkdtemp()
        persistent_cache.enable(local)
        link = EagerLink(fd)
        hooked = api.share_eager(link.write_fd)
        link.pull(local)
        linked = link.sock is not None
        planted = sorted(os.listdir(local))
        import jax, jax.numpy as jnp
        jax.devices()
        space = {"jnp": jnp, "jax": jax}
        with shared_eager.sharing():
            exec(code, space)
            jax.block_until_ready(space["value"])
        missed = sorted(shared_eager.link.missed)
        reported = shared_eager.report()
        passed = link.pass_on()
        compiled_here = sorted(
            n.split("-")[0] for n in os.listdir(local)
            if n.endswith("-cache") and n not in planted
        )
        value = jax.device_get(space["value"]).tolist()
        os.write(w, json.dumps({
            "hooked": hooked, "linked": linked, "planted": planted, "missed": missed,
            "reported": reported,
            "passed": passed, "value": value, "compiled_here": compiled_here,
        }).encode())
        os._exit(0)
    os.close(w)
    os.close(fd)
    os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as f:
        return json.loads(f.read())


def raw():
    '''A connection spoken to by hand: what a zygote holds, were it made to say
    anything at all.'''
    sock = socket.socket(fileno=compiler.connection())
    sock.settimeout(5)
    return sock


def pull(sock, since=0):
    sock.send(b"P" + json.dumps({"since": since}).encode())
    names = []
    while True:
        data = sock.recv(1 << 20)
        if not data:
            return None
        if data[:1] == b"D":
            return names
        names.append(json.loads(data[1:].partition(b"\n")[0])["name"])


def settle():
    time.sleep(1.5)  # the compiler learns while no message waits


def stores():
    top = tempfile.gettempdir()
    return [os.path.join(top, d) for d in os.listdir(top) if d.startswith(eager_compiler.PREFIX)]


def store():
    '''The entries of the compiler's private directory, read from the outside.'''
    return sorted(n for d in stores() for n in os.listdir(d) if n.endswith("-cache"))


def empty_store():
    for d in stores():
        for n in os.listdir(d):
            if n.endswith("-cache"):
                os.unlink(os.path.join(d, n))


CASES = {}
exec(sys.argv[2], globals())
said = CASES[sys.argv[1]]()
said["template"] = {
    "threads": len(os.listdir("/proc/self/task")), "backends": list(xla_bridge._backends),
    "compiler": compiler is not None,
}
print(json.dumps(said))
"""


def template(tmp_path: Path, case: str, cases: str, platforms: str = "cpu") -> dict[str, Any]:
    env = {"PATH": os.environ["PATH"], "JAX_PLATFORMS": platforms, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", TEMPLATE, case, cases],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    said: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return said


#: a run's set-up as eager primitives: an array constant, ones, a full, lax's add
#: (``*`` and ``+`` on arrays are jnp's jitted functions, not eager primitives: their
#: compiles stay each process's own)
SETUP = (
    "a = jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])\n"
    "value = jax.lax.add(jax.lax.add(a, jnp.ones((2, 3))), jnp.full((2, 3), 0.5))\n"
)
VALUE = [[2.5, 3.5, 4.5], [5.5, 6.5, 7.5]]

TWO = f"""
def two():
    first = jail({SETUP!r})
    settle()
    second = jail({SETUP!r})
    return {{"first": first, "second": second, "store": store()}}
CASES["two"] = two
"""


def test_a_jail_loads_what_the_compiler_learnt_from_another_jails_run(tmp_path: Path) -> None:
    said = template(tmp_path, "two", TWO)
    first, second = said["first"], said["second"]
    assert first["hooked"] and second["hooked"], said
    # the first had nothing planted: it compiled each itself, and reported them
    shared = {f"jit_{name}" for name in TABLE}
    assert first["planted"] == [] and len(first["missed"]) >= 3, first
    assert first["reported"] == len(first["missed"]) and first["passed"] > 0, first
    assert {n.split("-")[0] for n in first["missed"]} == set(first["compiled_here"]) & shared
    # the compiler learnt them meanwhile (its store: what it compiled itself), and the
    # second jail had them planted: it missed none, and compiled only what is no
    # shared primitive (jnp's own jitted helpers)
    assert sorted(f"{k}-cache" for k in first["missed"]) == said["store"], said
    assert second["planted"] == said["store"] and second["missed"] == [], second
    assert set(second["compiled_here"]) == set(first["compiled_here"]) - shared, said
    assert second["value"] == first["value"] == VALUE
    # the template forks as one thread and never started a backend
    assert said["template"] == {"threads": 1, "backends": [], "compiler": True}, said


FORGE = """
def forge():
    jail("value = jnp.ones((3,))")
    settle()
    key = [n[: -len("-cache")] for n in store() if n.startswith("jit_broadcast_in_dim-")][0]
    empty_store()
    lie = shared_eager.Description(
        key, "broadcast_in_dim",
        {"shape": {"t": [4]}, "broadcast_dimensions": {"t": []}, "sharding": None},
        (shared_eager.Aval((), "float32", False),),
    ).to_bytes()
    sock = raw()
    sock.send(b"L" + lie)
    settle()
    after = store()
    victim = jail("value = jnp.ones((3,))")
    return {"after": after, "key": key, "victim": victim}
CASES["forge"] = forge
"""


def test_a_key_claimed_for_another_description_stores_nothing_under_it(tmp_path: Path) -> None:
    """A report claims the key that ``jnp.ones((3,))``'s broadcast compiles to, for a
    description of another program (a broadcast to (4,)). The compiler compiles the
    description under its own key: the claimed key stays empty, and the next jail,
    given what the compiler learnt, computes ones with its own compile of that key."""
    said = template(tmp_path, "forge", FORGE)
    key, victim = said["key"], said["victim"]
    # what it learnt is the broadcast to (4,), under that program's own key
    assert len(said["after"]) == 1 and said["after"][0].startswith("jit_broadcast_in_dim-")
    assert said["after"][0] != f"{key}-cache", said
    assert f"{key}-cache" not in victim["planted"], victim
    assert victim["value"] == [1.0, 1.0, 1.0], victim
    assert "jit_broadcast_in_dim" in victim["compiled_here"], victim  # its own compile


FLOOD = f"""
def flood():
    sock = raw()
    lines = [b"not json", b'{{"key": 3}}', b"x" * 9000]
    for n in range({LEARN_PER_JAIL} + 8):
        lines.append(shared_eager.Description(
            "jit_iota-" + "%064x" % n, "iota",
            {{"dtype": {{"d": "float32"}}, "shape": {{"t": [n + 1]}}, "dimension": 0,
             "sharding": None}},
            (),
        ).to_bytes())
    sock.send(b"L" + b"\\n".join(lines[:24]))
    sock.send(b"L" + b"\\n".join(lines[24:]))
    for _ in range(40):
        time.sleep(0.25)
        if len(store()) >= {LEARN_PER_JAIL}:
            break
    time.sleep(1.0)
    learnt = len(store())
    pulled = pull(sock)
    sock.send(b"?what")
    hung_up = sock.recv(16) == b""
    other = jail({SETUP!r})
    return {{"learnt": learnt, "pulled": len(pulled), "hung_up": hung_up, "other": other}}
CASES["flood"] = flood
"""


def test_a_hostile_connection_burdens_only_itself(tmp_path: Path) -> None:
    """Lines that are no description are skipped; a connection has it learn
    LEARN_PER_JAIL descriptions at most; a message of no kind ends that connection,
    and that one only."""
    said = template(tmp_path, "flood", FLOOD)
    assert said["learnt"] == LEARN_PER_JAIL and said["pulled"] == LEARN_PER_JAIL, said
    assert said["hung_up"], said
    other = said["other"]
    assert other["passed"] > 0 and other["value"] == VALUE, other


DEAD = f"""
def dead():
    import signal
    taught = jail({SETUP!r})
    settle()
    def kill():
        os.kill(compiler.pid, signal.SIGKILL)
        os.waitpid(compiler.pid, 0)
    orphan = jail({SETUP!r}, before=kill)
    return {{"taught": taught, "orphan": orphan, "after": compiler.connection()}}
CASES["dead"] = dead
"""


def test_a_compiler_that_died_leaves_each_jail_compiling_for_itself(tmp_path: Path) -> None:
    """Its jails' links end at their next pull, their runs compile as without it, and
    a new jail gets no connection."""
    said = template(tmp_path, "dead", DEAD)
    orphan = said["orphan"]
    assert said["taught"]["linked"] and not orphan["linked"], said
    assert orphan["planted"] == [] and orphan["passed"] == 0, orphan
    assert orphan["missed"] == said["taught"]["missed"] and orphan["value"] == VALUE, orphan
    assert said["after"] is None, said


def test_a_device_workers_template_has_no_compiler(tmp_path: Path) -> None:
    """It would start a backend outside any jail: not where the jails use a device."""
    said = template(tmp_path, "none", "CASES['none'] = lambda: {}", platforms="tpu")
    assert said["template"] == {"threads": 1, "backends": [], "compiler": False}, said


def test_the_compiler_ends_with_its_template_and_leaves_no_directory(tmp_path: Path) -> None:
    """Its own directory goes with it; one left by a compiler killed outright (its pid
    not alive) goes when the next one starts, and a live one's stays."""
    dead, live = tmp_path / f"{PREFIX}999999999-x", tmp_path / f"{PREFIX}{os.getpid()}-y"
    for store in (dead, live):
        store.mkdir()
        (store / "jit_add-0-cache").write_bytes(b"left")
    said = template(tmp_path, "one", f"CASES['one'] = lambda: jail({SETUP!r})")
    assert len(said["missed"]) >= 3, said
    assert not dead.exists() and live.exists()
    live.joinpath("jit_add-0-cache").unlink()
    live.rmdir()
    deadline = time.monotonic() + 5
    while any(p.name.startswith(PREFIX) for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline, list(tmp_path.iterdir())
        time.sleep(0.1)


KEY = "jit_add-" + "0" * 64


@pytest.mark.parametrize(
    "raw",
    [
        {"key": KEY, "prim": "cos", "params": {}, "avals": []},
        {"key": "jit_cos-" + "0" * 64, "prim": "add", "params": {}, "avals": []},
        {"key": KEY[:-1], "prim": "add", "params": {}, "avals": []},
        {"key": KEY, "prim": "add", "params": {"f": "x"}, "avals": []},
        {"key": KEY, "prim": "add", "params": {}, "avals": [[[-1], "float32", False]]},
        {"key": KEY, "prim": "add", "params": {}, "avals": [[[1], "object", False]]},
        {"key": KEY, "prim": "add", "params": {}, "avals": [[[1] * 9, "int8", False]]},
        {"key": KEY, "prim": "add", "params": {}, "avals": [], "seq": 1},
    ],
)
def test_a_description_outside_the_codec_is_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(Unshareable):
        Description.parse(json.dumps(raw).encode())


def test_a_description_round_trips() -> None:
    description = Description(
        "jit_convert_element_type-" + "ab" * 32,
        "convert_element_type",
        {"new_dtype": {"d": "bfloat16"}, "weak_type": False, "sharding": None},
        (Aval((2, 3), "float32", True),),
    )
    assert Description.parse(description.to_bytes()) == description
