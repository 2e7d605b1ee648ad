"""The jail's seccomp filter, built with libseccomp through ctypes.

A deny-list after flatpak's ``setup_seccomp()`` (common/flatpak-run.c), with the
fixes of its CVEs: the TIOCSTI compare is masked to 32 bits (CVE-2019-10063); the
new mount API and ``clone3`` answer ENOSYS (CVE-2021-41133), so glibc falls back to
``clone``, whose namespace flags are then refused. Everything else is allowed: the
jail's namespaces, uid and empty capability set do the rest. Only the native
x86-64/aarch64 ABI is in the filter, so i386 (``int 0x80``) and x32 system calls
kill the process (libseccomp's bad-arch action).

The BPF program is built once per process and handed to bubblewrap as
``--seccomp FD`` (a memfd), which loads it after ``PR_SET_NO_NEW_PRIVS``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import logging
import os

log = logging.getLogger(__name__)

# <seccomp.h>
_ACT_ALLOW = 0x7FFF0000
_ACT_KILL_PROCESS = 0x80000000
_ATTR_ACT_BADARCH = 2
_CMP_NE, _CMP_EQ, _CMP_GE, _CMP_MASKED_EQ = 1, 4, 5, 7


def _errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


#: Refused outright with EPERM: namespaces and mounts, tracing and other processes'
#: memory, kernel keyrings, BPF, perf, modules, kexec, clocks, raw I/O, SysV IPC and
#: POSIX message queues (a channel that would outlive a run inside one jail, and
#: memory that RLIMIT_DATA does not count), file handles, NUMA page moves.
EPERM_SYSCALLS = [
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "process_madvise",
    "perf_event_open",
    "bpf",
    "userfaultfd",
    "add_key",
    "keyctl",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "syslog",
    "acct",
    "quotactl",
    "iopl",
    "ioperm",
    "modify_ldt",
    "uselib",
    "vhangup",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "name_to_handle_at",
    "open_by_handle_at",
    "lookup_dcookie",
    "move_pages",
    "migrate_pages",
    "fanotify_init",
    "shmget",
    "msgget",
    "semget",
    "mq_open",
]

#: Answered ENOSYS, as if the kernel were older, so libraries fall back cleanly.
ENOSYS_SYSCALLS = [
    "clone3",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
]

_CLONE_NEW_FLAGS = (
    0x00000080,  # CLONE_NEWTIME
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
_PERSONALITY_FLAGS = (0x0040000, 0x0400000)  # ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC
#: Socket families allowed: AF_UNIX, AF_INET, AF_INET6 (an empty network namespace
#: leaves them only loopback). AF_NETLINK, AF_PACKET, AF_VSOCK (which a network
#: namespace does not isolate), AF_ALG, Bluetooth... get EAFNOSUPPORT.
ALLOWED_SOCKET_FAMILIES = (1, 2, 10)


class SeccompUnavailable(RuntimeError):
    pass


def _lib() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SeccompUnavailable(
            f"libseccomp is not installed ({exc}); apt-get install libseccomp2"
        ) from None
    lib.seccomp_api_get.restype = ctypes.c_uint
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


class _Filter:
    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        # KILL_PROCESS needs API level 3 (kernel 4.14); asking also makes libseccomp
        # probe the kernel, without which it refuses that action.
        self._kill = _ACT_KILL_PROCESS if lib.seccomp_api_get() >= 3 else 0  # 0: KILL_THREAD
        self._ctx = lib.seccomp_init(_ACT_ALLOW)
        if not self._ctx:
            raise SeccompUnavailable("seccomp_init failed")
        self._check(lib.seccomp_attr_set(self._ctx, _ATTR_ACT_BADARCH, self._kill), "attr")

    def _check(self, rc: int, what: str) -> None:
        if rc < 0:
            raise SeccompUnavailable(f"libseccomp {what}: {os.strerror(-rc)}")

    def rule(self, action: int, name: str, *cmps: tuple[int, int, int, int]) -> None:
        nr = self._lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:  # unknown to this libseccomp or not on this architecture
            log.debug("seccomp: %s is unknown here; not filtered", name)
            return
        args = (_ArgCmp * max(1, len(cmps)))(*[_ArgCmp(*c) for c in cmps])
        self._check(self._lib.seccomp_rule_add_array(self._ctx, action, nr, len(cmps), args), name)

    def export(self) -> bytes:
        fd = os.memfd_create("seccomp-export")
        try:
            self._check(self._lib.seccomp_export_bpf(self._ctx, fd), "export")
            os.lseek(fd, 0, os.SEEK_SET)
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)
            self._lib.seccomp_release(self._ctx)


@functools.cache
def filter_bpf() -> bytes:
    """The compiled filter (a raw BPF program, as bwrap's ``--seccomp`` wants it)."""
    f = _Filter(_lib())
    for name in EPERM_SYSCALLS:
        f.rule(_errno(errno.EPERM), name)
    for name in ENOSYS_SYSCALLS:
        f.rule(_errno(errno.ENOSYS), name)
    for flag in _CLONE_NEW_FLAGS:
        f.rule(_errno(errno.EPERM), "clone", (0, _CMP_MASKED_EQ, flag, flag))
    for request in (_TIOCSTI, _TIOCLINUX):
        f.rule(_errno(errno.EPERM), "ioctl", (1, _CMP_MASKED_EQ, 0xFFFFFFFF, request))
    for flag in _PERSONALITY_FLAGS:
        f.rule(_errno(errno.EPERM), "personality", (0, _CMP_MASKED_EQ, flag, flag))
    # socket(): refuse every family but the allowed ones.
    eafnosupport = _errno(errno.EAFNOSUPPORT)
    top = max(ALLOWED_SOCKET_FAMILIES)
    f.rule(eafnosupport, "socket", (0, _CMP_GE, top + 1, 0))
    for family in range(top):
        if family not in ALLOWED_SOCKET_FAMILIES:
            f.rule(eafnosupport, "socket", (0, _CMP_EQ, family, 0))
    return f.export()


def filter_fd() -> int:
    """A fresh memfd holding the filter, positioned at 0, for ``bwrap --seccomp``."""
    fd = os.memfd_create("jaxplay-seccomp")
    os.write(fd, filter_bpf())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
