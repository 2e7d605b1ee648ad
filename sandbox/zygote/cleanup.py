"""The zygote's cleanup after each run: nothing of a run outlives it in the jail.

When a run's child is gone the zygote (pid 2, the jail's child subreaper: orphans
come back to it) kills every other process left in the jail with ``kill(-1)``,
reaps them, and empties the jail's writable places (``/tmp``, ``/dev/shm``; the
compilation cache too, if anything but JAX's files is in it). A process kept for
the tenant's next run is spared only when it is the only one left.
"""

from __future__ import annotations

import os
import signal
import time

from sandbox.jail import compile_cache

WIPED = ("/tmp", "/dev/shm")
CLEANUP_S = 2.0


def _others(spare: int | None = None) -> list[int]:
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me, spare)]


def kept_paths(tops: tuple[str, ...] = WIPED) -> dict[str, int]:
    """Directories under the wiped places that must stay, with their modes: bind
    mounts (the runtime, when a checkout lives under /tmp) and the directories bwrap
    made on the way to them. Read once, at start: nothing in the jail can mount."""
    kept: dict[str, int] = {}
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].replace("\\040", " ") for line in f]
    for point in points:
        for top in tops:
            if point.startswith(top + "/"):
                path = point
                while path != top:
                    kept.setdefault(path, os.lstat(path).st_mode & 0o7777)
                    path = os.path.dirname(path)
    return kept


def cleanup(kept: dict[str, int], spare: int | None = None) -> tuple[bool, bool]:
    """Kill whatever the run left in the jail and empty its writable places. The
    process ``spare`` (kept for the next run) is spared only if it is the only one
    left: anything else and everything goes, it too. Returns (clean, spared)."""
    deadline = time.monotonic() + CLEANUP_S
    spared = spare is not None and not _others(spare)
    while _others(spare if spared else None):
        spared = False  # kill(-1) below spares nobody
        try:
            os.kill(-1, signal.SIGKILL)  # everything we may signal in this pid namespace
        except ProcessLookupError:
            pass
        reap_children()  # what came back to us (we are the subreaper)
        if time.monotonic() > deadline:
            return False, False
        time.sleep(0.001)
    try:
        # The compilation cache is not wiped, but only what JAX writes may stay in it.
        if os.path.ismount(compile_cache.CACHE_DIR) and not compile_cache.sane():
            os.chmod(compile_cache.CACHE_DIR, 0o700)
            wipe(compile_cache.CACHE_DIR, deadline, {})
        for top in WIPED:
            os.chmod(top, 0o700)  # the run owns it and may have locked itself out
            wipe(top, deadline, kept)
    except (OSError, RecursionError, TimeoutError):
        return False, False
    return True, spared


def wipe(path: str, deadline: float, kept: dict[str, int]) -> None:
    """Remove everything under ``path`` but the ``kept`` directories, which are
    emptied of anything else and get their modes back."""
    if time.monotonic() > deadline:
        raise TimeoutError
    with os.scandir(path) as entries:
        for entry in list(entries):
            if entry.path in kept:
                if not os.path.ismount(entry.path):  # a directory on the way to one
                    os.chmod(entry.path, 0o700)
                    wipe(entry.path, deadline, kept)
                    os.chmod(entry.path, kept[entry.path])
            elif entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)
                wipe(entry.path, deadline, kept)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)


def reap_children() -> None:
    """Reap our exited children without waiting (a run's, in the kept process; what
    came back to the zygote, its subreaper, in its cleanup): zombies would count as
    processes left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
