"""A jail template's process: the zygote's imports once, then a fork per new jail.

Started (unjailed, with a jail's environment and nothing of the server's) as
``python -I -B -c "..." SOCK_FD CPUS ENV`` by the pool's ``JailTemplate``
(sandbox/jail/fork_client.py). It dies with the process that started it, takes a
CPUs (``CPUS``: one, so that numpy starts no thread) and a jail's environment (``ENV``,
JSON) before it imports anything,
imports and warms what every zygote does (main.py's ``boot``: JAX, the libraries,
tracing; never a backend), has a child make the warm-ups' compilation cache entries
(seed.py), forks its eager compiler (eager_compiler.py), freezes its heap, and
serves fork_server.py's loop. Each forked child enters its own jail
(sandbox/jail/enter.py) and becomes that jail's zygote (main.py's ``serve``) with the
descriptors the pool sent for it and its own connection to the eager compiler. It
never runs anyone's code: a zygote forked from it is as pristine as one that
imported JAX itself.
"""

from __future__ import annotations

import functools
import gc
import os
import sys
import time
from typing import TYPE_CHECKING, NoReturn

from sandbox.jail import fork_server

if TYPE_CHECKING:
    from sandbox.zygote.eager_compiler import EagerCompiler
    from sandbox.zygote.seed import Seed


def main(argv: list[str]) -> NoReturn:
    sock = fork_server.take_place(argv)
    # imports JAX: after the CPUs and the environment are set
    from sandbox.zygote import eager_compiler, seed
    from sandbox.zygote import main as zygote

    zygote.boot()
    made = seed.make()  # the warm-ups' compiles, once (seed.py): a child of this makes them
    compiler = eager_compiler.start()  # a child that stays (none where jails use a device)
    gc.collect()
    gc.freeze()  # every jail's zygote shares these pages
    fork_server.serve(
        sock,
        functools.partial(_zygote, made),
        functools.partial(_own_descriptors, compiler),
        seeded=len(made),
        eager_compiler=compiler.pid if compiler is not None else 0,
    )


def _own_descriptors(compiler: EagerCompiler | None) -> dict[str, int]:
    """What the template gives each new jail of its own: a connection to its eager
    compiler, when it has one that still answers."""
    fd = compiler.connection() if compiler is not None else None
    return {"eager": fd} if fd is not None else {}


def _zygote(made: Seed, fds: dict[str, int]) -> NoReturn:
    """In a forked jail (its pid 2): this jail's zygote, from its imports on, its cache
    seeded with ``made``; or, for the pool's start-up check (``Jailer.check``: only the
    role ``check`` of the pool's), proof that a jail was built and entered, and its end."""
    if "check" in fds:
        os.write(fds["check"], b"ok")
        os._exit(0)
    from sandbox.zygote import main as zygote_main
    from sandbox.zygote import seed

    started = time.monotonic()
    seed.plant(made)  # before its first warm child, whose warm-ups load them
    argv = ["zygote", str(fds["ctl"]), str(fds.get("run_filter", "-")), str(fds["log"])]
    ctl, run_filter = zygote_main.take_descriptors(argv)
    zygote_main.serve(ctl, run_filter, started, eager_fd=fds.get("eager"))
    sys.exit(0)


if __name__ == "__main__":
    main(sys.argv)
