"""A process forked from a jail template enters a jail of its own: bubblewrap's steps,
made in-process so that what the template imported (JAX, the libraries) comes along
at the price of a fork instead of a new interpreter.

The template (sandbox/jail/template.py) never runs anyone's code; it forks, and the
child calls ``enter``. Three processes come of it, as of bubblewrap:

- **the monitor** (the forked child itself, outside the jail's pid namespace): joins
  the jail's cgroup while it still has the template's uid (cgroup v1 lets a process
  move only its own uid's processes), takes the jail's rlimits and CPUs, becomes the
  jail's host uid with no capability left in the host's user namespace, unshares a
  user, mount, pid, network, IPC, UTS and cgroup namespace (the user one maps root
  to that host uid only), forks the jail's pid 1 and waits for it: its exit status is
  the jail's;
- **pid 1**: builds the jail's root on a tmpfs exactly as ``bwrap_argv`` asks bubblewrap
  to (read-only ``/usr``, runtime and environment at their host paths, a fresh
  ``/proc`` with the host-wide files masked, a minimal ``/dev``, size-capped private
  ``/tmp``, ``/dev/shm`` and compilation cache, the root read-only), pivots into it,
  sets the host name, brings up the loopback, disables further user namespaces
  (``max_user_namespaces`` = 1, then a nested user namespace where the jail's uid is
  1000, as ``bwrap --disable-userns --uid 1000`` does), forks pid 2, drops every
  capability and reaps orphans until pid 2 exits;
- **pid 2**, the command: drops every capability, sets no-new-privileges and the
  seccomp filter last, and returns from ``enter`` (the only process that does).

Every step that fails ends the process with a message on ``err_fd`` and status
``ENTER_FAILED``: a jail that cannot be built as asked never runs anything.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NoReturn

from sandbox.jail import seccomp
from sandbox.jail import syscalls as sc

#: Exit status of a jail whose building failed (bubblewrap's own is 1).
ENTER_FAILED = 71
#: Where the new root is assembled (in the monitor's copy of the host's mounts).
_BASE = "/tmp"
_NAMESPACES = (
    sc.CLONE_NEWUSER
    | sc.CLONE_NEWNS
    | sc.CLONE_NEWPID
    | sc.CLONE_NEWNET
    | sc.CLONE_NEWIPC
    | sc.CLONE_NEWUTS
    | sc.CLONE_NEWCGROUP
)
#: mountinfo's escapes (``\\040`` for a space); no codec is imported while the root is
#: being rebuilt: nothing can be imported then
_OCTAL = re.compile(r"\\([0-7]{3})")
_DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
_COVERED_PROC = ("sys", "sysrq-trigger", "irq", "bus")
_USR_LINKS = (
    ("usr/lib", "/lib"),
    ("usr/lib64", "/lib64"),
    ("usr/bin", "/bin"),
    ("usr/sbin", "/sbin"),
)


@dataclass(frozen=True)
class JailSpec:
    """Everything a forked jail is built from; sent to the template as JSON."""

    #: host (uid, gid) the jail runs as; None: the template's own
    user: tuple[int, int] | None
    #: cgroup.procs files to join (one per v1 controller, one on v2)
    cgroup_procs: tuple[str, ...]
    #: (RLIMIT_*, soft, hard)
    rlimits: tuple[tuple[int, int, int], ...]
    cpus: tuple[int, ...] | None
    #: host paths bound read-only at the same place (runtime, environment, sandbox)
    ro_paths: tuple[str, ...]
    #: (path, bytes) of size-capped private tmpfs, mode 0700, in mount order
    tmpfs: tuple[tuple[str, int], ...]
    devices: tuple[str, ...]
    masked_proc: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    hostname: str = "sandbox"
    inner_uid: int = 1000

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JailSpec:
        user = data["user"]
        return cls(
            user=(int(user[0]), int(user[1])) if user is not None else None,
            cgroup_procs=tuple(data["cgroup_procs"]),
            rlimits=tuple((int(r), int(s), int(h)) for r, s, h in data["rlimits"]),
            cpus=tuple(map(int, data["cpus"])) if data["cpus"] is not None else None,
            ro_paths=tuple(data["ro_paths"]),
            tmpfs=tuple((str(p), int(n)) for p, n in data["tmpfs"]),
            devices=tuple(data["devices"]),
            masked_proc=tuple(data["masked_proc"]),
            env=dict(data["env"]),
            hostname=str(data["hostname"]),
            inner_uid=int(data["inner_uid"]),
        )


def enter(spec: JailSpec, keep_fds: Sequence[int], err_fd: int, seccomp_fd: int) -> None:
    """Called in a child just forked from the template. Returns only in the jail's
    pid 2, with ``keep_fds`` (and nothing else but 0-2 as /dev/null) still open."""
    try:
        program = _read_all(seccomp_fd)
        os.close(seccomp_fd)
        _close_others({*keep_fds, err_fd})
        _stdio_to_null()
        os.setsid()  # no TIOCSTI into a terminal (bwrap --new-session)
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)  # the template gone: the jail too
        for procs in spec.cgroup_procs:  # first, with the template's uid
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        for res, soft, hard in spec.rlimits:
            resource.setrlimit(res, (soft, hard))
        if spec.cpus is not None:
            os.sched_setaffinity(0, spec.cpus)
        if spec.user is not None:
            uid, gid = spec.user
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        # caps survive a non-root uid change (a worker's ambient CAP_SETUID): none left
        # in the host's user namespace from here on
        sc.drop_all_capabilities(bounding=False)
        sc.prctl(sc.PR_SET_DUMPABLE, 1)  # a uid change cleared it: our own maps next
        uid, gid = os.geteuid(), os.getegid()
        sc.unshare(_NAMESPACES)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
    except BaseException as exc:  # any failure ends this process
        _fail(err_fd, "the jail could not be entered", exc)
    pid = _fork(err_fd)
    if pid:
        _monitor(pid, err_fd, keep_fds)
    _pid_one(spec, keep_fds, err_fd, program)


def _monitor(pid: int, err_fd: int, keep_fds: Sequence[int]) -> NoReturn:
    """Outside the jail's pid namespace: hold nothing, wait for pid 1, end as it did."""
    for fd in keep_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    status = ENTER_FAILED
    try:
        sc.drop_all_capabilities()
        _, waited = os.waitpid(pid, 0)
        status = os.waitstatus_to_exitcode(waited)
    except BaseException as exc:
        _say(err_fd, f"the jail's monitor failed: {exc}")
    os._exit(status if status >= 0 else 128 - status)


def _pid_one(spec: JailSpec, keep_fds: Sequence[int], err_fd: int, program: bytes) -> None:
    try:
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
        old_umask = os.umask(0)
        _build_root(spec)
        sc.sethostname(spec.hostname)
        sc.loopback_up()
        _nested_user_namespace(spec.inner_uid)
        os.umask(old_umask)
        os.chdir("/tmp")
        os.environ.clear()
        os.environ.update(spec.env)
        os.environ["PWD"] = "/tmp"  # as bubblewrap sets it
    except BaseException as exc:
        _fail(err_fd, "the jail could not be built", exc)
    pid = _fork(err_fd)
    if pid:
        _init(pid, err_fd, keep_fds)
    try:
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
        sc.drop_all_capabilities()
        sc.prctl(sc.PR_SET_NO_NEW_PRIVS, 1)
        if program:
            seccomp.load(program)  # last: nothing after it needs what it refuses
        os.close(err_fd)
    except BaseException as exc:
        _fail(err_fd, "the jail's command could not be confined", exc)


def _init(pid: int, err_fd: int, keep_fds: Sequence[int]) -> NoReturn:
    """The jail's pid 1: no capability, nothing open; reaps every orphan and ends
    with pid 2's status (its end takes the whole pid namespace with it)."""
    status = ENTER_FAILED
    try:
        sc.drop_all_capabilities()
        for fd in (*keep_fds, err_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        while True:
            try:
                done, waited = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if done == pid:
                status = os.waitstatus_to_exitcode(waited)
                break
    except BaseException:
        pass
    os._exit(status if status >= 0 else 128 - status)


def _build_root(spec: JailSpec) -> None:
    """bubblewrap's setup_newroot for ``bwrap_argv``'s operations, in its order."""
    sc.mount(None, "/", None, sc.MS_SILENT | sc.MS_SLAVE | sc.MS_REC)
    sc.mount("tmpfs", _BASE, "tmpfs", sc.MS_NODEV | sc.MS_NOSUID)
    os.chdir(_BASE)
    os.mkdir("newroot", 0o755)
    sc.mount("newroot", "newroot", None, sc.MS_SILENT | sc.MS_BIND | sc.MS_REC)
    os.mkdir("oldroot", 0o755)
    sc.pivot_root(_BASE, "oldroot")
    os.chdir("/")
    # the sysctl is per user namespace: written here, in the jail's first one, before
    # the old root (and with it the only writable /proc/sys) goes
    _write("/oldroot/proc/sys/user/max_user_namespaces", "1")

    _ro_bind("/usr", "/usr")
    for target, link in _USR_LINKS:
        os.symlink(target, "/newroot" + link)
    if os.path.exists("/oldroot/etc/ld.so.cache"):
        _ro_bind("/etc/ld.so.cache", "/etc/ld.so.cache")
    _mount_proc(spec.masked_proc)
    _mount_dev(spec.devices)
    for path, size in spec.tmpfs:
        _ensure_dir("/newroot" + path)
        sc.mount(
            "tmpfs",
            "/newroot" + path,
            "tmpfs",
            sc.MS_NOSUID | sc.MS_NODEV,
            f"mode=0700,size={size}",
        )
    _remount_ro("/newroot/dev", sc.MS_NOSUID | sc.MS_NODEV)
    # after the tmpfs mounts: a runtime under /tmp is bound on top of the private /tmp
    for path in spec.ro_paths:
        _ro_bind(path, path)
    _remount_ro("/newroot", sc.MS_NOSUID | sc.MS_NODEV)

    sc.mount("oldroot", "oldroot", None, sc.MS_SILENT | sc.MS_REC | sc.MS_PRIVATE)
    sc.umount2("oldroot", sc.MNT_DETACH)
    old = os.open("/", os.O_DIRECTORY | os.O_RDONLY)
    try:
        os.chdir("/newroot")
        sc.pivot_root(".", ".")
        os.fchdir(old)
        sc.umount2(".", sc.MNT_DETACH)
        os.chdir("/")
    finally:
        os.close(old)


def _mount_proc(masked: Sequence[str]) -> None:
    dest = "/newroot/proc"
    _ensure_dir(dest)
    sc.mount("proc", dest, "proc", sc.MS_NOSUID | sc.MS_NOEXEC | sc.MS_NODEV)
    for name in _COVERED_PROC:
        path = f"{dest}/{name}"
        if os.access(path, os.W_OK):  # what is writable at all (as bubblewrap decides)
            sc.mount(path, path, None, sc.MS_SILENT | sc.MS_BIND | sc.MS_REC)
            _remount_ro(path, sc.MS_NOSUID | sc.MS_NODEV | sc.kept_flags(path))
    for name in masked:  # /dev/null without device access: opening it fails (EACCES)
        if os.path.exists(f"/oldroot/proc/{name}"):
            sc.mount("/oldroot/dev/null", f"{dest}/{name}", None, sc.MS_SILENT | sc.MS_BIND)
            _remount_ro(f"{dest}/{name}", sc.MS_NOSUID | sc.MS_NODEV)


def _mount_dev(devices: Sequence[str]) -> None:
    dest = "/newroot/dev"
    _ensure_dir(dest)
    sc.mount("tmpfs", dest, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "mode=0755")
    for node in _DEV_NODES:
        _create_file(f"{dest}/{node}")
        _dev_bind(f"/oldroot/dev/{node}", f"{dest}/{node}")
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", f"{dest}/{name}")
    os.symlink("/proc/self/fd", f"{dest}/fd")
    os.symlink("/proc/kcore", f"{dest}/core")
    os.mkdir(f"{dest}/shm", 0o755)
    os.mkdir(f"{dest}/pts", 0o755)
    sc.mount(
        "devpts",
        f"{dest}/pts",
        "devpts",
        sc.MS_NOSUID | sc.MS_NOEXEC,
        "newinstance,ptmxmode=0666,mode=620",
    )
    os.symlink("pts/ptmx", f"{dest}/ptmx")
    for node in devices:  # a GPU's or TPU's, with device access
        target = "/newroot" + node
        _ensure_dir(os.path.dirname(target))
        _create_file(target)
        _dev_bind("/oldroot" + node, target)


def _dev_bind(source: str, target: str) -> None:
    """A device node bound with device access, writable, without setuid."""
    sc.mount(source, target, None, sc.MS_SILENT | sc.MS_BIND)
    flags = sc.MS_SILENT | sc.MS_BIND | sc.MS_REMOUNT | sc.MS_NOSUID
    sc.mount(None, target, None, flags | (sc.kept_flags(target) & ~sc.MS_NODEV))


def _ro_bind(source: str, dest: str) -> None:
    src, target = "/oldroot" + source, "/newroot" + dest
    if os.path.isdir(src):
        _ensure_dir(target)
    else:
        _ensure_dir(os.path.dirname(target))
        _create_file(target)
    sc.mount(src, target, None, sc.MS_SILENT | sc.MS_BIND | sc.MS_REC)
    # every mount under it too, each keeping the flags its source locked
    for point in [target, *_submounts(target)]:
        _remount_ro(point, sc.MS_NOSUID | sc.MS_NODEV | sc.kept_flags(point))


def _remount_ro(path: str, flags: int) -> None:
    sc.mount(None, path, None, sc.MS_SILENT | sc.MS_BIND | sc.MS_REMOUNT | sc.MS_RDONLY | flags)


def _submounts(path: str) -> list[str]:
    found = []
    with open("/oldroot/proc/self/mountinfo") as f:
        for line in f:
            point = _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), line.split()[4])
            if point.startswith(path + "/"):
                found.append(point)
    return found


def _nested_user_namespace(inner_uid: int) -> None:
    """As ``bwrap --disable-userns --uid N``: a nested user namespace (the sysctl of
    the first, set to 1, now counts it), the jail's uid ``inner_uid`` in it, and a
    check that no further one can be made."""
    sc.unshare(sc.CLONE_NEWUSER)
    _write("/proc/self/uid_map", f"{inner_uid} 0 1")
    _write("/proc/self/gid_map", f"{inner_uid} 0 1")
    try:
        sc.unshare(sc.CLONE_NEWUSER)
    except OSError:
        return
    raise OSError(0, "a further user namespace could still be made")


def _ensure_dir(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


def _create_file(path: str) -> None:
    if not os.path.exists(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o444))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _close_others(keep: set[int]) -> None:
    start = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, 1 << 16)


def _stdio_to_null() -> None:
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)


def _fork(err_fd: int) -> int:
    try:
        return os.fork()
    except BaseException as exc:
        _fail(err_fd, "the jail could not fork", exc)


def _say(err_fd: int, text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(err_fd, (text.rstrip() + "\n").encode(errors="replace"))


def _fail(err_fd: int, what: str, exc: BaseException) -> NoReturn:
    _say(err_fd, f"jaxplay-jail: {what}: {exc}")
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os._exit(ENTER_FAILED)
