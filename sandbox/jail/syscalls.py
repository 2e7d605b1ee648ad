"""The system calls a forked jail makes for itself, through libc (ctypes).

Python has no ``mount``, ``pivot_root``, ``capset`` or (before 3.12) ``unshare``;
bubblewrap makes these calls in C, and a jail forked from a template process
(sandbox/jail/enter.py) makes the same ones here. Every wrapper raises ``OSError``
with the call's name and its arguments on failure: a jail that cannot be built as
asked never starts.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_MACHINE = os.uname().machine

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME = 32, 1024, 2048
MS_BIND, MS_REC, MS_SILENT = 4096, 16384, 32768
MS_PRIVATE, MS_SLAVE, MS_RELATIME = 1 << 18, 1 << 19, 1 << 21
MS_STRICTATIME = 1 << 24
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4

_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(_MACHINE)
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}.get(_MACHINE)
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
with open("/proc/sys/kernel/cap_last_cap") as _f:  # read now: a jail's monitor has no /proc
    CAP_LAST_CAP = int(_f.read())

#: statvfs flags a bind mount keeps when remounted read-only: the kernel refuses a
#: remount (in a user namespace) that would clear a flag the source mount has locked
_KEPT_FLAGS = (
    (os.ST_NOSUID, MS_NOSUID),
    (os.ST_NODEV, MS_NODEV),
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME),
    (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    rc = _libc.mount(
        enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data) if data else None
    )
    _check(rc, f"mount({source!r}, {target!r}, {fstype!r}, {flags:#x}, {data!r})")


def umount2(target: str, flags: int) -> None:
    _check(_libc.umount2(target.encode(), ctypes.c_int(flags)), f"umount2({target!r})")


def pivot_root(new_root: str, put_old: str) -> None:
    if _SYS_PIVOT_ROOT is None:
        raise OSError(0, f"pivot_root: no system call number for {_MACHINE}")
    rc = _libc.syscall(_SYS_PIVOT_ROOT, new_root.encode(), put_old.encode())
    _check(int(rc), f"pivot_root({new_root!r}, {put_old!r})")


def sethostname(name: str) -> None:
    data = name.encode()
    _check(_libc.sethostname(data, ctypes.c_size_t(len(data))), f"sethostname({name!r})")


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    zero = ctypes.c_ulong(0)
    rc = _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), zero, zero)
    _check(rc, f"prctl({option}, {arg2}, {arg3})")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_all_capabilities(bounding: bool = True) -> None:
    """No capability left in any set: ambient, bounding (``bounding``; it takes
    CAP_SETPCAP, so before the others), effective, permitted, inheritable."""
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    if bounding:
        for cap in range(CAP_LAST_CAP + 1):
            prctl(PR_CAPBSET_DROP, cap)
    if _SYS_CAPSET is None:
        raise OSError(0, f"capset: no system call number for {_MACHINE}")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(int(_libc.syscall(_SYS_CAPSET, ctypes.byref(header), data)), "capset(0)")


def kept_flags(path: str) -> int:
    """The MS_ flags of the mount holding ``path`` that a remount must keep."""
    flag = os.statvfs(path).f_flag
    return sum(ms for st, ms in _KEPT_FLAGS if flag & st)


def loopback_up() -> None:
    """Bring the network namespace's ``lo`` up (the kernel gives it 127.0.0.1 and ::1)."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(s, siocgifflags, req))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sh22x", b"lo", flags | iff_up))
