"""The jail's seccomp filters, built with libseccomp through ctypes.

The jail's filter is a deny-list after flatpak's ``setup_seccomp()``
(common/flatpak-run.c), with the fixes of its CVEs: the TIOCSTI compare is masked to
32 bits (CVE-2019-10063); the new mount API and ``clone3`` answer ENOSYS
(CVE-2021-41133), so glibc falls back to ``clone``, whose namespace flags are then
refused. Where a call takes a kind as argument it is an allow-list: ``socketpair``
only AF_UNIX, AF_INET/AF_INET6 sockets only stream or datagram over TCP or UDP,
``personality`` only PER_LINUX and the query. Calls that change another process's
limits or scheduling are refused. System call numbers above the last one jaxplay has
reviewed (``SYSCALL_TABLE``) answer ENOSYS, so a kernel newer than this file adds no
surface. Only the native x86-64/aarch64 ABI is in the filter, so i386 (``int
0x80``) and x32 system calls kill the process (libseccomp's bad-arch action). A call
named here that the installed libseccomp cannot resolve stops the jail from starting
(``SeccompUnavailable``), never a silent gap.

The BPF program is built once per process and handed to bubblewrap as
``--seccomp FD`` (a memfd), which loads it after ``PR_SET_NO_NEW_PRIVS``.

The run filter (``run_filter_bpf``) is stacked on top by a zygote's child before it
runs user code: it refuses signals to the jail's pid 1 and to the zygote (pid 2),
which run as the same uid, so a run cannot kill or stop its zygote.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import logging
import os
import struct

log = logging.getLogger(__name__)

# <seccomp.h>
_ACT_ALLOW = 0x7FFF0000
_ACT_KILL_PROCESS = 0x80000000
_ATTR_ACT_BADARCH = 2
_CMP_NE, _CMP_EQ, _CMP_GE, _CMP_MASKED_EQ = 1, 4, 5, 7
_LOW32 = 0xFFFFFFFF


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
    "quotactl_fd",  # above the table anyway; listed so that raising the table keeps it out
]

#: The system call table jaxplay ships: per architecture (its AUDIT_ARCH value), the
#: highest number reviewed for this filter and the call it belongs to. Every number
#: above it answers ENOSYS: quotactl_fd (443) and everything newer (landlock,
#: memfd_secret, futex_waitv, cachestat, fchmodat2, mseal, ...), which glibc and
#: Python treat as "kernel too old" and work around. Raise it only after reviewing
#: each new call against the lists above.
SYSCALL_TABLE: dict[str, tuple[int, str, int]] = {
    "x86_64": (0xC000003E, "mount_setattr", 442),
    "aarch64": (0xC00000B7, "mount_setattr", 442),
}
#: Calls that change another process's limits or scheduling: allowed on oneself
#: (argument 0, the pid or tid, is 0) only, so a run cannot lower its zygote's limits
#: or priority. (glibc's setrlimit and Python's resource module use prlimit64(0, ...).)
SELF_ONLY_SYSCALLS = [
    "prlimit64",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setaffinity",
    "sched_setattr",
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
#: ioctl requests refused on any descriptor: faking terminal input (TIOCSTI,
#: TIOCLINUX), attaching line disciplines to the jail's own pseudo-terminals (TIOCSETD,
#: kernel code most programs never reach), redirecting the console (TIOCCONS).
REFUSED_IOCTLS = {"TIOCSTI": 0x5412, "TIOCLINUX": 0x541C, "TIOCSETD": 0x5423, "TIOCCONS": 0x541D}
#: Socket families allowed: AF_UNIX, AF_INET, AF_INET6 (an empty network namespace
#: leaves them only loopback). AF_NETLINK, AF_PACKET, AF_VSOCK (which a network
#: namespace does not isolate), AF_ALG, Bluetooth... get EAFNOSUPPORT.
ALLOWED_SOCKET_FAMILIES = (1, 2, 10)
AF_UNIX = 1
#: For AF_INET and AF_INET6: the socket types (SOCK_STREAM, SOCK_DGRAM; the flags
#: SOCK_NONBLOCK and SOCK_CLOEXEC are masked off) and protocols (0, IPPROTO_TCP,
#: IPPROTO_UDP) allowed. No raw sockets, SCTP, UDP-Lite, DCCP, MPTCP...
INET_SOCKET_TYPES = (1, 2)
INET_PROTOCOLS = (0, 6, 17)
_SOCK_TYPE_MASK = 0xF
_SOCK_PROTOCOL_CAP = max(INET_PROTOCOLS) + 1  # this and above: refused by one rule
#: personality(): only PER_LINUX and the query 0xffffffff (UNAME26, ADDR_NO_RANDOMIZE,
#: READ_IMPLIES_EXEC, other personas... are refused).
PERSONALITY_ALLOWED = (0, 0xFFFFFFFF)
#: The jail's pid 1 (bubblewrap's init) and pid 2 (the command: a zygote), in the
#: jail's own pid namespace. bubblewrap always starts them so.
JAIL_INIT_PID, ZYGOTE_PID = 1, 2


_NR_SCMP_ERROR = -1  # seccomp_syscall_resolve_name: a name libseccomp does not know


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
    lib.seccomp_arch_native.restype = ctypes.c_uint32
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
        nr = self.resolve(name)
        if nr == _NR_SCMP_ERROR:
            raise SeccompUnavailable(
                f"the installed libseccomp does not know the system call {name!r}, which the "
                "jail's filter must handle: upgrade libseccomp2 (the jail will not start "
                "with a gap in its filter)"
            )
        if nr < 0:  # a pseudo number: the call does not exist on this architecture
            return
        args = (_ArgCmp * max(1, len(cmps)))(*[_ArgCmp(*c) for c in cmps])
        self._check(self._lib.seccomp_rule_add_array(self._ctx, action, nr, len(cmps), args), name)

    def resolve(self, name: str) -> int:
        return int(self._lib.seccomp_syscall_resolve_name(name.encode()))

    def native_arch(self) -> str:
        token = self._lib.seccomp_arch_native()
        for arch, (audit, _, _) in SYSCALL_TABLE.items():
            if audit == token:
                return arch
        raise SeccompUnavailable(
            f"no system call table for this architecture (AUDIT_ARCH {token:#x}): the jail "
            "supports x86_64 and aarch64"
        )

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
def filter_bpf(strict: bool = True) -> bytes:
    """The jail's filter (a raw BPF program, as bwrap's ``--seccomp`` wants it).

    ``strict=False`` builds the filter as it was before the allow-lists, the system
    call table and the self-only rules: for the benchmark of what they cost, only."""
    f = _Filter(_lib())
    eperm, enosys = _errno(errno.EPERM), _errno(errno.ENOSYS)
    for name in EPERM_SYSCALLS:
        f.rule(eperm, name)
    for name in ENOSYS_SYSCALLS:
        f.rule(enosys, name)
    for flag in _CLONE_NEW_FLAGS:
        f.rule(eperm, "clone", (0, _CMP_MASKED_EQ, flag, flag))
    ioctls = (
        REFUSED_IOCTLS.values()
        if strict
        else (REFUSED_IOCTLS["TIOCSTI"], REFUSED_IOCTLS["TIOCLINUX"])
    )
    for request in ioctls:
        f.rule(eperm, "ioctl", (1, _CMP_MASKED_EQ, _LOW32, request))
    eafnosupport = _errno(errno.EAFNOSUPPORT)
    top = max(ALLOWED_SOCKET_FAMILIES)
    f.rule(eafnosupport, "socket", (0, _CMP_GE, top + 1, 0))
    for family in range(top):
        if family not in ALLOWED_SOCKET_FAMILIES:
            f.rule(eafnosupport, "socket", (0, _CMP_EQ, family, 0))
    if not strict:
        for flag in (0x0040000, 0x0400000):  # ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC
            f.rule(eperm, "personality", (0, _CMP_MASKED_EQ, flag, flag))
        return f.export()
    _personality_rules(f, eperm)
    _inet_socket_rules(f, eperm, _errno(errno.EPROTONOSUPPORT))
    f.rule(eafnosupport, "socketpair", (0, _CMP_NE, AF_UNIX, 0))
    for name in SELF_ONLY_SYSCALLS:
        f.rule(eperm, name, (0, _CMP_NE, 0, 0))
    # setpriority(which, who): PRIO_PROCESS (0) of oneself only; PRIO_PGRP and PRIO_USER
    # (every process of the uid: the zygote too) are refused. ioprio_set likewise, with
    # IOPRIO_WHO_PROCESS (1).
    f.rule(eperm, "setpriority", (0, _CMP_NE, 0, 0))
    f.rule(eperm, "setpriority", (1, _CMP_NE, 0, 0))
    f.rule(eperm, "ioprio_set", (0, _CMP_NE, 1, 0))
    f.rule(eperm, "ioprio_set", (1, _CMP_NE, 0, 0))
    arch = f.native_arch()
    audit, last_name, last_nr = SYSCALL_TABLE[arch]
    if f.resolve(last_name) != last_nr:
        raise SeccompUnavailable(
            f"libseccomp numbers {last_name} {f.resolve(last_name)}, jaxplay's table {last_nr}"
        )
    return _above_table_enosys(audit, last_nr) + f.export()


def _personality_rules(f: _Filter, action: int) -> None:
    """Refuse every persona but PER_LINUX (0) and the query (0xffffffff): the kernel
    reads 32 bits, and a 32-bit value is neither all zeros nor all ones exactly when
    two neighbouring bits differ, which one masked compare per pair finds."""
    assert PERSONALITY_ALLOWED == (0, _LOW32)
    for bit in range(31):
        pair = 3 << bit
        for differing in (1 << bit, 2 << bit):
            f.rule(action, "personality", (0, _CMP_MASKED_EQ, pair, differing))


def _inet_socket_rules(f: _Filter, bad_type: int, bad_protocol: int) -> None:
    """AF_INET and AF_INET6: only the allowed types (flags masked off; others get
    EPERM, as raw sockets do without CAP_NET_RAW) and protocols (EPROTONOSUPPORT).
    (A family with bits above 32 set is refused by the family rules already.)"""
    for family in (2, 10):
        for kind in range(_SOCK_TYPE_MASK + 1):
            if kind not in INET_SOCKET_TYPES:
                f.rule(
                    bad_type,
                    "socket",
                    (0, _CMP_EQ, family, 0),
                    (1, _CMP_MASKED_EQ, _SOCK_TYPE_MASK, kind),
                )
        for protocol in range(_SOCK_PROTOCOL_CAP):
            if protocol not in INET_PROTOCOLS:
                f.rule(bad_protocol, "socket", (0, _CMP_EQ, family, 0), (2, _CMP_EQ, protocol, 0))
        f.rule(bad_protocol, "socket", (0, _CMP_EQ, family, 0), (2, _CMP_GE, _SOCK_PROTOCOL_CAP, 0))


def _sock_filter(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _above_table_enosys(audit_arch: int, last_nr: int) -> bytes:
    """BPF put before libseccomp's program: on the native architecture, a system call
    number above ``last_nr`` returns ENOSYS. (libseccomp adds rules per named call
    only; this covers every number, known or not. x32 numbers, with bit 30 set, go on
    to libseccomp's program, which kills them. Jumps are relative, so the program
    that follows is unchanged.)"""
    ld_w_abs, jeq_k, jge_k, jgt_k, ret_k = 0x20, 0x15, 0x35, 0x25, 0x06
    return b"".join(
        [
            _sock_filter(ld_w_abs, 0, 0, 4),  # seccomp_data.arch
            _sock_filter(jeq_k, 0, 4, audit_arch),  # another arch: to libseccomp
            _sock_filter(ld_w_abs, 0, 0, 0),  # seccomp_data.nr
            _sock_filter(jge_k, 2, 0, 0x40000000),  # x32: to libseccomp (kill)
            _sock_filter(jgt_k, 0, 1, last_nr),
            _sock_filter(ret_k, 0, 0, _errno(errno.ENOSYS)),
        ]
    )


@functools.cache
def run_filter_bpf() -> bytes:
    """The filter a zygote's child stacks on the jail's before it runs user code: no
    signal to the jail's pid 1 or to the zygote (``kill`` of 1, 2 or -1, every other
    way to name them, and pidfd_send_signal, which also takes a /proc/PID directory),
    so that a run, though of the zygote's uid, cannot kill or stop it."""
    f = _Filter(_lib())
    eperm = _errno(errno.EPERM)
    for pid in (JAIL_INIT_PID, ZYGOTE_PID):
        for name in ("kill", "tkill", "rt_sigqueueinfo", "pidfd_open"):
            f.rule(eperm, name, (0, _CMP_MASKED_EQ, _LOW32, pid))
        for arg in (0, 1):
            f.rule(eperm, "tgkill", (arg, _CMP_MASKED_EQ, _LOW32, pid))
            f.rule(eperm, "rt_tgsigqueueinfo", (arg, _CMP_MASKED_EQ, _LOW32, pid))
    f.rule(eperm, "kill", (0, _CMP_MASKED_EQ, _LOW32, _LOW32))  # -1: everything we may signal
    f.rule(eperm, "pidfd_send_signal")
    return f.export()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def load(program: bytes) -> None:
    """Stack a raw BPF program on the calling thread's filters (and its future
    children's). Call it while single-threaded. Needs no privilege: it sets
    no_new_privs first (inside a jail bubblewrap has set it already)."""
    if not program or len(program) % 8:
        raise ValueError("not a BPF program")
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    zero = ctypes.c_ulong(0)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), zero, zero, zero) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    mode = ctypes.c_ulong(_SECCOMP_MODE_FILTER)
    if libc.prctl(_PR_SET_SECCOMP, mode, ctypes.byref(prog), zero, zero) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def filter_fd(strict: bool = True) -> int:
    """A fresh memfd holding the filter, positioned at 0, for ``bwrap --seccomp``."""
    return _memfd("jaxplay-seccomp", filter_bpf(strict))


def run_filter_fd() -> int:
    """A fresh memfd holding the run filter, positioned at 0, for a zygote."""
    return _memfd("jaxplay-run-seccomp", run_filter_bpf())


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
