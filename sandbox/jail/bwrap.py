"""The bubblewrap command line of a jail, and what of the host it binds.

The jail sees: ``/usr`` (read-only, with the usr-merge symlinks), the Python runtime,
its virtual environment and the ``sandbox`` package, each read-only at its host path
(so the interpreter, ``sys.path`` and the editable install work unchanged), a fresh
``/proc`` of its own pid namespace, a minimal ``/dev``, and private size-capped
tmpfs ``/tmp`` and ``/dev/shm``. No ``/etc`` beyond the dynamic linker's cache, no
``/home``, ``/root`` (save the runtime path inside it), ``/var``, ``/sys``, ``/run``.
Every namespace is new, the network one empty; no capability, no new privileges,
no nested user namespace, a new session (TIOCSTI), death with its parent.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import sandbox
from sandbox.environments import tpu_extra
from sandbox.jail import compile_cache
from sandbox.jail.enter import JailSpec
from sandbox.jail.settings import JailLimits

#: The uid and gid user code sees inside the jail (mapped to the unprivileged host uid).
INNER_UID = 1000
INNER_HOSTNAME = "sandbox"

#: The whole environment of a jailed process. Nothing of the server's reaches it.
BASE_ENV: dict[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "USER": "sandbox",
    "LOGNAME": "sandbox",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "JAX_PLATFORMS": "cpu",
}

#: Host-wide files of /proc that JAX does not read (it reads /proc/self/* and
#: /proc/sys/vm/overcommit_memory), masked so that no tenant sees the host's load,
#: pressure, memory, interrupts, disk and scheduler statistics or file locks: the
#: sum of every other tenant's activity. A masked file is /dev/null bound read-only
#: without device access: opening it fails with EACCES. (Other processes' /proc/PID
#: are out of sight already: the jail has its own pid namespace.)
MASKED_PROC = (
    "loadavg", "stat", "meminfo", "vmstat", "zoneinfo", "buddyinfo", "pagetypeinfo",
    "diskstats", "schedstat", "interrupts", "softirqs", "locks", "key-users",
    "sched_debug", "timer_list", "slabinfo", "pressure/cpu", "pressure/io",
    "pressure/memory", "pressure/irq",
)  # fmt: skip

#: What bwrap itself is started with: its pid-1 helper keeps this environment, and
#: the jail can read it in /proc/1/environ.
LAUNCH_ENV: dict[str, str] = {"PATH": "/usr/bin:/bin"}


@dataclass(frozen=True)
class Runtime:
    """The interpreter and the host directories bound read-only into every jail."""

    python: str
    ro_paths: tuple[str, ...]
    #: directories put first on the interpreter's ``sys.path`` (bound read-only too):
    #: a library overlay, another version of one library of the set
    #: (sandbox/environments/library_choices.py)
    path_first: tuple[str, ...] = ()

    def with_path_first(self, paths: Sequence[str]) -> Runtime:
        """This runtime with ``paths`` first on ``sys.path``."""
        return replace(self, path_first=tuple(paths))

    @classmethod
    def discover(cls) -> Runtime:
        """This process's own interpreter and environment."""
        return cls.for_environment(
            os.path.realpath(sys.base_prefix), str(Path(sys.prefix).absolute())
        )

    @classmethod
    def for_environment(cls, base_prefix: str, prefix: str) -> Runtime:
        """The interpreter installed at ``base_prefix`` with the virtual environment at
        ``prefix`` (another JAX version's: sandbox/environments/versions.py)."""
        package = Path(sandbox.__file__).resolve().parent
        candidates = [Path(base_prefix), Path(prefix), package]
        kept: list[Path] = []
        for path in sorted(set(candidates), key=lambda p: len(p.parts)):
            if path.is_relative_to("/usr") or any(path.is_relative_to(k) for k in kept):
                continue
            kept.append(path)
        if tpu_extra.installed(prefix):  # libtpu aborts at load without it (tpu_extra.py)
            kept.append(Path(tpu_extra.CPU_POSSIBLE))
        return cls(python=str(Path(prefix) / "bin" / "python"), ro_paths=tuple(map(str, kept)))


def bwrap_argv(
    bwrap: str,
    runtime: Runtime,
    limits: JailLimits,
    command: Sequence[str],
    *,
    seccomp_fd: int,
    env: Mapping[str, str] | None = None,
    devices: Sequence[str] = (),
    mask_proc: bool = True,
) -> list[str]:
    """The full bwrap command that runs ``command`` in a fresh jail.

    ``devices``: host device nodes (a GPU's ``/dev/nvidia*``, a TPU's ``/dev/accel*``)
    bound into the jail's otherwise minimal ``/dev``; nothing is bound on CPU workers.
    ``mask_proc``: hide ``MASKED_PROC`` (off only to measure what it costs)."""
    argv = [
        bwrap,
        "--unshare-all",  # user, ipc, pid, net, uts, cgroup
        "--unshare-user",  # explicit: fail, never silently run without a user namespace
        "--disable-userns",
        "--uid", str(INNER_UID), "--gid", str(INNER_UID),
        "--hostname", INNER_HOSTNAME,
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
        "--clearenv",
    ]  # fmt: skip
    for key, value in {**BASE_ENV, **(env or {})}.items():
        argv += ["--setenv", key, value]
    argv += [
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin",
        "--symlink", "usr/sbin", "/sbin",
        "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
    ]  # fmt: skip
    argv += ["--proc", "/proc"]
    if mask_proc:  # only those this kernel has: bwrap cannot create files in /proc
        for name in MASKED_PROC:
            if os.path.exists("/proc/" + name):
                argv += ["--ro-bind", "/dev/null", "/proc/" + name]
    argv += [
        "--dev", "/dev",
        *[arg for node in devices for arg in ("--dev-bind", node, node)],
        "--size", str(limits.tmp_bytes), "--perms", "0700", "--tmpfs", "/tmp",
        "--size", str(limits.shm_bytes), "--perms", "0700", "--tmpfs", "/dev/shm",
        *(  # the tenant's compilation cache, kept between its runs (compile_cache.py)
            ["--size", str(limits.compile_cache_bytes), "--perms", "0700",
             "--tmpfs", compile_cache.CACHE_DIR]
            if limits.compile_cache_bytes else []
        ),
        "--remount-ro", "/dev",  # bwrap's /dev is a tmpfs the jail could otherwise fill
    ]  # fmt: skip
    # After the tmpfs mounts: bwrap mounts in argument order, so a runtime that lives
    # under /tmp (a checkout in /tmp/...) is bound on top of the private /tmp, not hidden by it.
    for path in (*runtime.ro_paths, *runtime.path_first):
        argv += ["--ro-bind", path, path]
    argv += [
        "--remount-ro", "/",
        "--chdir", "/tmp",
        "--seccomp", str(seccomp_fd),
        "--",
        *command,
    ]  # fmt: skip
    return argv


def jail_spec(
    runtime: Runtime,
    limits: JailLimits,
    *,
    user: tuple[int, int] | None,
    cgroup_procs: Sequence[str] = (),
    cpus: Sequence[int] | None = None,
    env: Mapping[str, str] | None = None,
    devices: Sequence[str] = (),
    mask_proc: bool = True,
) -> JailSpec:
    """The same jail as ``bwrap_argv`` (and ``Jail._limits_argv``'s rlimits), for a
    process forked from a jail template to build itself (sandbox/jail/enter.py)."""
    tmpfs = [("/tmp", limits.tmp_bytes), ("/dev/shm", limits.shm_bytes)]
    if limits.compile_cache_bytes:
        tmpfs.append((compile_cache.CACHE_DIR, limits.compile_cache_bytes))
    rlimits = (
        (resource.RLIMIT_DATA, limits.data_bytes, limits.data_bytes),
        (resource.RLIMIT_FSIZE, limits.fsize_bytes, limits.fsize_bytes),
        (resource.RLIMIT_NOFILE, limits.nofile, limits.nofile),
        (resource.RLIMIT_NPROC, limits.nproc, limits.nproc),
        (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 1),
        (resource.RLIMIT_CORE, 0, 0),
    )
    return JailSpec(
        user=user,
        cgroup_procs=tuple(cgroup_procs),
        rlimits=rlimits,
        cpus=tuple(cpus) if cpus is not None else None,
        ro_paths=(*runtime.ro_paths, *runtime.path_first),
        tmpfs=tuple(tmpfs),
        devices=tuple(devices),
        masked_proc=MASKED_PROC if mask_proc else (),
        env={**BASE_ENV, **(env or {})},
        hostname=INNER_HOSTNAME,
        inner_uid=INNER_UID,
    )


def python_command(runtime: Runtime, *args: str) -> list[str]:
    """The interpreter in isolated mode (no PYTHON* variables, no user site, no cwd on
    sys.path) and without writing bytecode (everything it can see is read-only).
    A runtime's ``path_first`` goes first on ``sys.path`` before the ``-c`` code runs."""
    if runtime.path_first and len(args) >= 2 and args[0] == "-c":
        first = f"import sys; sys.path[0:0] = {list(runtime.path_first)!r}\n"
        args = ("-c", first + args[1], *args[2:])
    return [runtime.python, "-I", "-B", *args]


def jail_returncode(returncode: int) -> int:
    """A jailed command's exit status, read as the command's own: bubblewrap reports a
    command killed by signal N as status 128 + N."""
    return -(returncode - 128) if 128 < returncode < 128 + 65 else returncode
