"""A tenant's compilation cache inside its jail: where it lives and its upkeep.

The jail mounts a tmpfs of its own at ``CACHE_DIR`` (sandbox/jail/bwrap.py), beside
``/tmp``: private to this jail (its mount namespace), gone with it, never shared with
another tenant (a cache entry is executable code). The zygote points JAX's persistent
cache at it before it forks (sandbox/zygote/main.py's ``enable_compile_cache``); the warm child's trusted warm-ups and the
tenant's own runs write it; the between-run wipe of ``/tmp`` and ``/dev/shm`` leaves
it. After each run, once every process of the run is gone, the zygote checks it
(``sane``) and empties it when a run has put anything there that JAX would not: a
directory, a link, a name JAX does not write, too many entries, or a nearly full
mount. A corrupt entry in a sane-looking directory is harmless: JAX fails to load it,
compiles instead and says nothing (sandbox/engine/core/persistent_cache.py). What the
cache cannot stop: a run of this tenant planting a well-formed executable under
another computation's key; only this tenant's later runs could load it.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat

CACHE_DIR = "/var/cache/jaxplay-xla"
#: More entries than a person's session of edits makes (each eager operation on each
#: shape is one, ~3 KiB): beyond it the cache starts over.
MAX_ENTRIES = 4000
#: Emptied when fuller than this: a full mount would only make writes fail.
MAX_USED_FRACTION = 0.8
_ENTRY = re.compile(r"^[A-Za-z0-9_.-]+-cache$")  # jax/_src/lru_cache.py's names


def is_entry_name(name: str) -> bool:
    """Whether ``name`` is one JAX gives a cache entry."""
    return _ENTRY.match(name) is not None


def write_entry(path: str, name: str, data: bytes, made_ns: int) -> None:
    """An entry the jail is given (its template's seed, what the eager compiler
    learnt) written into the cache at ``path`` as a new file, never through a link,
    with the time it was made; OSError (or, for a time out of range, ValueError or
    OverflowError) if not (there already, a full mount), leaving no file of it: every
    jail's copy of an entry is the same file, time included, or none."""
    target = os.path.join(path, name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(target, flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.utime(fd, ns=(made_ns, made_ns))
    except (OSError, ValueError, OverflowError):
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(target)
        raise
    os.close(fd)


def sane(path: str = CACHE_DIR) -> bool:
    """Whether the cache holds only what JAX writes, within bounds. The caller
    empties it when not (and retires the jail when it cannot)."""
    try:
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(path, 0o700)
        usage = os.statvfs(path)
        if usage.f_blocks and 1 - usage.f_bavail / usage.f_blocks > MAX_USED_FRACTION:
            return False
        count = 0
        with os.scandir(path) as entries:
            for entry in entries:
                count += 1
                if count > MAX_ENTRIES or not is_entry_name(entry.name):
                    return False
                entry_info = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(entry_info.st_mode) or entry_info.st_nlink != 1:
                    return False
    except OSError:
        return False
    return True
