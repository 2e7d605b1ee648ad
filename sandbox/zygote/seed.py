"""The compilation cache every jail of a template starts with: its warm-ups' own.

A zygote's first warm child runs the engine's warm-ups before the zygote says hello
(child.py: the warm-up request): their compiles were most of a new jail's CPU, the
same programs made again in every jail. The template makes them once instead. Before
it forks any jail, a child of it (``make``) starts a backend, runs those same
warm-ups with JAX's persistent cache pointed at a directory of its own, and exits;
the template keeps what it wrote in memory, and each zygote it forks writes that into
its own jail's cache tmpfs before its first warm child (``plant``). The warm child's
warm-ups then load those executables instead of compiling them; what they warm in the
process (a first run's set-up) is warmed as before.

What this does not change: the entries are compiled by jaxplay's own warm-ups from
constant programs, in a process that never runs anyone's code (as the template never
does); the template itself starts no backend (the child has the threads, and is gone
before the first fork), so it still forks as its one thread; each jail writes its own
copy, so what a tenant does to its cache (its runs write it) stays in its jail; and
every jail of a template, spare or tenant's, starts with the same entries, so a
pristine run still looks like any run. What a run *shows* is never loaded from the
cache (sandbox/engine/core/persistent_cache.py).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import stat
import sys
import tempfile
import time
import traceback
from typing import NoReturn

from sandbox.engine import api
from sandbox.engine.core import persistent_cache
from sandbox.jail import compile_cache

#: Entries by name: their bytes and their time (the seed's files are written with it,
#: so that each jail's copy says when the template made it).
Seed = dict[str, tuple[bytes, int]]

#: What a seed may hold in all (the warm-ups write ~10 KB): beyond it, no seed.
MAX_SEED_BYTES = 4 << 20
#: How long the seed's child may take (it takes ~0.3 s): past it, killed and no seed.
MAKE_S = 60.0


def backend_outside_jails() -> bool:
    """Whether a child of the template may start a backend outside any jail (this
    seed's, the eager compiler's): only the CPU's, never an accelerator's device
    nodes, which a device worker's jails open (its jails' JAX_PLATFORMS says)."""
    return os.environ.get("JAX_PLATFORMS") == "cpu"


def make(timeout_s: float = MAKE_S) -> Seed:
    """In the template (its one thread, JAX imported, no backend): the warm-ups'
    cache entries, made by a child of it. Empty, with the reason on standard error,
    when the jails are a device worker's, the child fails, or this JAX has no cache
    that can be bypassed."""
    if not backend_outside_jails():
        print("jaxplay: compile seed: none, the jails' JAX_PLATFORMS is not cpu", file=sys.stderr)
        return {}
    started = time.monotonic()
    directory = tempfile.mkdtemp(prefix="jaxplay-seed-")
    try:
        pid = os.fork()
        if pid == 0:
            _warm_into(directory)
        if not _ended_well(pid, timeout_s):
            return {}
        seed = _read(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    took = (time.monotonic() - started) * 1000
    size = sum(len(data) for data, _ in seed.values())
    print(
        f"jaxplay: compile seed: {len(seed)} entries, {size} bytes, {took:.0f} ms", file=sys.stderr
    )
    return seed


def _warm_into(directory: str) -> NoReturn:
    code = 1
    try:
        if persistent_cache.enable(directory):
            for step in api.warm_backend():
                step()
            code = 0
        else:
            print("jaxplay: compile seed: this JAX's cache cannot be bypassed", file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
    os._exit(code)


def _ended_well(pid: int, timeout_s: float) -> bool:
    pidfd = os.pidfd_open(pid)
    try:
        if not select.select([pidfd], [], [], timeout_s)[0]:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.waitpid(pid, 0)
            print(f"jaxplay: compile seed: its child took over {timeout_s:g} s", file=sys.stderr)
            return False
    finally:
        os.close(pidfd)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code != 0:
        print(f"jaxplay: compile seed: its child ended with {code}", file=sys.stderr)
    return code == 0


def _read(directory: str) -> Seed:
    """What JAX wrote: its entries' names only, regular files, MAX_SEED_BYTES in all."""
    seed: Seed = {}
    size = 0
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        info = os.lstat(path)
        if not compile_cache.is_entry_name(name) or not stat.S_ISREG(info.st_mode):
            continue
        size += info.st_size
        if size > MAX_SEED_BYTES:
            print(f"jaxplay: compile seed: over {MAX_SEED_BYTES} bytes, none", file=sys.stderr)
            return {}
        with open(path, "rb") as f:
            seed[name] = (f.read(), info.st_mtime_ns)
    return seed


def plant(seed: Seed, path: str = compile_cache.CACHE_DIR) -> int:
    """In a new jail's zygote, before its first warm child: the seed written into the
    jail's own cache (when the jail mounted one). Returns how many entries it wrote."""
    if not seed or not os.path.ismount(path):
        return 0
    written = 0
    for name, (data, made_ns) in seed.items():
        try:
            compile_cache.write_entry(path, name, data, made_ns)
        except OSError as exc:  # a full or odd mount: the warm child compiles the rest
            print(f"jaxplay: compile seed: {name}: {exc}", file=sys.stderr)
            continue
        written += 1
    return written
