"""Starting, limiting and killing one jail.

A jail is started in three steps so that no process of it ever runs unlimited:

1. ``/bin/sh`` is spawned, as jaxplay's own uid, blocked reading one line from its
   stdin;
2. from outside, the supervisor puts that process into the jail's cgroup, which
   all its descendants inherit;
3. it writes the line; sh ``exec``s ``setpriv`` (the jail's own uid, no capabilities:
   sandbox/jail/uids.py; only where jaxplay may switch uids), ``prlimit`` (the
   rlimits) and ``taskset`` (the CPU affinity), which ``exec`` bubblewrap, which
   builds the jail and runs the command inside. Whatever else is written to stdin is
   the command's own stdin.

Killing is from outside too: SIGKILL to bubblewrap (whose pid-1 helper then dies of
``--die-with-parent``, taking the whole pid namespace with it) and to everything in
the cgroup, then a wait until the cgroup is empty.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import grp
import logging
import os
import pwd
import shutil
import signal
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.jail.bwrap import BASE_ENV, LAUNCH_ENV, Runtime, bwrap_argv, jail_spec, python_command
from sandbox.jail.cgroups import Cgroups, JailCgroup
from sandbox.jail.fork_client import ForkedJail, JailTemplate
from sandbox.jail.procstate import processes_by_uid
from sandbox.jail.seccomp import SeccompUnavailable, filter_bpf, filter_fd, run_filter_bpf
from sandbox.jail.settings import JailConfig, JailLimits
from sandbox.jail.uids import Capabilities, can_switch_uids, launcher_argv

log = logging.getLogger(__name__)

_GATE = 'read -r _ || exit 111; exec "$@"'
#: How long a killed jail may take to be gone before we say so.
TEARDOWN_S = 2.0


class JailUnavailable(RuntimeError):
    """This host cannot jail user code (and the unsafe flag was not given)."""


def lock_uid(uid: int) -> socket.socket | None:
    """The host-wide lock of jail uid ``uid`` (an abstract unix socket name: the
    kernel frees it when its holder dies), or None if another process holds it."""
    lock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        lock.bind(f"\0jaxplay-jail-uid-{uid}".encode())
    except OSError:
        lock.close()
        return None
    return lock


class NoFreeSlot(RuntimeError):
    """Every jail uid is in use (JAXPLAY_JAIL_SLOTS jails exist)."""


@dataclass(frozen=True)
class Hardening:
    """The defences of issue 10, each on by default. Code may switch one off (never the
    environment): the benchmark, to measure what each costs, and the tests of the
    zygote check, which need a run able to do what the filters refuse."""

    #: the filter's allow-lists, system call table and self-only rules (seccomp.py)
    strict_seccomp: bool = True
    #: a zygote's children stack the run filter: no signal to the zygote or pid 1
    run_filter: bool = True
    #: after every run the pool compares the zygote's limits and scheduling with their
    #: start values and retires it on any change (sandbox/jail/procstate.py)
    zygote_check: bool = True
    #: host-wide /proc files masked (bwrap.MASKED_PROC)
    mask_proc: bool = True


#: Everything off: the jail as it was before issue 10, for the benchmark.
NO_HARDENING = Hardening(False, False, False, False)
#: How long a new jail waits for a jail uid to be released before it gives up.
SLOT_WAIT_S = 10.0


class Jailer:
    """What every jail on this host shares: settings, runtime, cgroups, filter, user."""

    def __init__(
        self,
        limits: JailLimits | None = None,
        config: JailConfig | None = None,
        hardening: Hardening | None = None,
    ) -> None:
        # the settings are read once, at start-up, and passed in (sandbox/assembly/settings.py);
        # without them, the declared defaults
        self.limits = limits or JailLimits()
        self.config = config or JailConfig()
        self.hardening = hardening or Hardening()
        bwrap = shutil.which(self.config.bwrap)
        if bwrap is None:
            raise JailUnavailable(
                f"bubblewrap ({self.config.bwrap!r}) is not installed: apt-get install bubblewrap "
                "(scripts/setup.sh does it)"
            )
        self.bwrap = bwrap
        try:
            filter_bpf(self.hardening.strict_seccomp)
            run_filter_bpf()
        except SeccompUnavailable as exc:
            raise JailUnavailable(f"the jail's seccomp filter cannot be built: {exc}") from None
        #: device nodes bound into every jail (a GPU/TPU worker's; none on CPU)
        self.devices: tuple[str, ...] = ()
        #: environment every jail gets beyond bwrap.BASE_ENV (a GPU/TPU worker's:
        #: JAX_PLATFORMS, driver paths); a jail template imports JAX in it
        self.env: dict[str, str] = {}
        try:
            switch = can_switch_uids(Capabilities.of(), os.geteuid())
        except ValueError as exc:
            raise JailUnavailable(str(exc)) from None
        #: the (uid, gid) each jail is launched as, when this process may switch uids
        #: (root, or the capabilities for it: uids.py): one per slot; empty: own uid
        self.users: list[tuple[int, int]] = self._jail_users() if switch else []
        #: setpriv, which launches each jail as its uid (None: jails run as our own)
        self.setpriv: str | None = None
        if self.users:
            self.setpriv = shutil.which("setpriv", path=LAUNCH_ENV["PATH"])
            if self.setpriv is None:
                raise JailUnavailable(
                    "setpriv (util-linux) is missing: it launches each jail as its own uid"
                )
        self._free_users = collections.deque(self.users)
        self._uid_locks: dict[int, socket.socket] = {}
        self.runtime = Runtime.discover()
        self.cgroups = Cgroups.detect(self.config)
        if swept := self.cgroups.sweep():
            log.warning("removed %d cgroups left by a jaxplay that died without cleaning up", swept)
        self._cpus = sorted(os.sched_getaffinity(0))
        self._next_cpu = 0
        #: jail templates by command (fork_client.py), started on first use
        self._templates: dict[tuple[str, ...], JailTemplate] = {}
        #: how long a template may take to import what it preloads
        self.template_start_s = 120.0

    def with_runtime(self, runtime: Runtime) -> Jailer:
        """The same jailer (settings, cgroups, filter, user) for jails that run another
        interpreter and environment (another JAX version's), with templates of its own."""
        other = copy.copy(self)
        other.runtime = runtime
        other._templates = {}
        return other

    def template(self, command: Sequence[str]) -> JailTemplate:
        """The jail template that runs ``command`` (this jailer's runtime): started on
        its first jail, with a jail's environment."""
        key = tuple(command)
        if (found := self._templates.get(key)) is None:
            # One CPU, whatever a jail gets: numpy's OpenBLAS starts a thread per
            # further CPU as it is imported, and the template forks only while it is
            # single-threaded. XLA sizes its pools in each jail's process, by its CPUs.
            env = {**BASE_ENV, **self.env}
            found = JailTemplate(command, env, self._cpus[:1], start_s=self.template_start_s)
            self._templates[key] = found
        return found

    @property
    def templates(self) -> list[JailTemplate]:
        """This jailer's templates (each started on its first jail)."""
        return list(self._templates.values())

    async def close_templates(self) -> None:
        templates, self._templates = list(self._templates.values()), {}
        for template in templates:
            await template.close()

    def _jail_users(self) -> list[tuple[int, int]]:
        if self.config.jail_uid_base > 0:
            return self._numbered_users()
        base, slots = self.config.jail_user, self.config.jail_slots
        names = [f"{base}-{i}" for i in range(slots)] if slots > 0 else [base]
        users, missing = [], []
        for name in names:
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                missing.append(name)
                continue
            if entry.pw_uid == 0:
                raise JailUnavailable(f"the jail user {name!r} must not be root")
            users.append((entry.pw_uid, entry.pw_gid))
        if missing:
            shown = ", ".join(missing[:3]) + (
                f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            )
            raise JailUnavailable(
                f"able to switch uids, jaxplay launches each jail as its own user, and {shown} "
                "do not exist: run scripts/setup.sh (it creates them), or set "
                "JAXPLAY_JAIL_SLOTS to the number that exist (0: one shared JAXPLAY_JAIL_USER), "
                "or JAXPLAY_JAIL_UID_BASE (numeric uids, as in a worker container)"
            )
        if len({uid for uid, _ in users}) != len(users):
            raise JailUnavailable(f"the jail users {names[0]}... do not have distinct uids")
        return users

    def _numbered_users(self) -> list[tuple[int, int]]:
        """Uids JAXPLAY_JAIL_UID_BASE ... + JAXPLAY_JAIL_SLOTS - 1, which no user of
        this system may have: nobody else's processes may share them. Their gid is the
        group JAXPLAY_JAIL_USER where the system has it (scripts/setup.sh's ACLs name
        it: the way to a runtime under /root), else each uid's own number."""
        base, count = self.config.jail_uid_base, max(self.config.jail_slots, 1)
        group = None
        with contextlib.suppress(KeyError):
            group = grp.getgrnam(self.config.jail_user).gr_gid
        last = base + count - 1
        if last >= 2**32 - 1:  # (uid_t)-1 means "unchanged" to the kernel
            raise JailUnavailable(f"JAXPLAY_JAIL_UID_BASE={base}: uid {last} is out of range")
        for uid in range(base, last + 1):
            owner = None
            with contextlib.suppress(KeyError):
                owner = pwd.getpwuid(uid).pw_name
            if owner is not None or uid == os.getuid():
                raise JailUnavailable(
                    f"JAXPLAY_JAIL_UID_BASE={base}: jail uid {uid} is the user "
                    f"{owner or 'jaxplay runs as'}; choose a range of "
                    f"JAXPLAY_JAIL_SLOTS={self.config.jail_slots} uids that nothing else uses"
                )
        return [(uid, uid if group is None else group) for uid in range(base, last + 1)]

    @property
    def slots(self) -> int | None:
        """How many jails may exist at once (None: no bound: one shared uid)."""
        return len(self.users) if self.config.jail_slots > 0 and self.users else None

    async def take_user(self) -> tuple[int, int] | None:
        """The (uid, gid) for a new jail: a free slot's (waiting up to SLOT_WAIT_S for
        one), the shared jail user's, or None (no uid switch: jails run as our own uid).
        Released slots are reused last-released-last. A slot is this process's while it
        holds the slot's lock, so that two jaxplay processes on one host (a server and
        a worker, several workers) never give one uid to two jails."""
        if not self.users:
            return None
        if self.slots is None:
            return self.users[0]
        deadline = time.monotonic() + SLOT_WAIT_S
        while True:
            # A released uid is handed out only once no process of its last jail is
            # left: processes that have left the jail's cgroup may still be exiting
            # (and without cgroups nothing else tells).
            # (In a thread: the scan takes milliseconds, the event loop relays runs.)
            busy = await asyncio.to_thread(processes_by_uid) if self._free_users else {}
            for user in self._free_users:
                if user[0] not in busy and (lock := lock_uid(user[0])) is not None:
                    self._free_users.remove(user)
                    self._uid_locks[user[0]] = lock
                    return user
            if time.monotonic() > deadline:
                raise NoFreeSlot(
                    f"none of the {self.slots} jail uids (JAXPLAY_JAIL_SLOTS) is free of "
                    "processes and of other jaxplay processes on this host"
                )
            await asyncio.sleep(0.05)

    def release_user(self, user: tuple[int, int] | None) -> None:
        if self.slots is not None and user is not None and user not in self._free_users:
            if (lock := self._uid_locks.pop(user[0], None)) is not None:
                lock.close()
            self._free_users.append(user)

    def owns_uid(self, uid: int) -> bool:
        return uid in self._uid_locks

    @property
    def cpus(self) -> list[int]:
        """The CPUs jails are placed on (this process's affinity)."""
        return list(self._cpus)

    def next_cpus(self) -> list[int] | None:
        """CPUs for the next jail, round-robin over ours (None: all, unpinned)."""
        n = self.limits.cpus
        if n <= 0 or n >= len(self._cpus):
            return None
        chosen = [self._cpus[(self._next_cpu + i) % len(self._cpus)] for i in range(n)]
        self._next_cpu = (self._next_cpu + n) % len(self._cpus)
        return chosen

    def python(self, *args: str) -> list[str]:
        return python_command(self.runtime, *args)

    def jail(self) -> Jail:
        return Jail(self)

    async def check(self, template_command: Sequence[str] | None = None) -> None:
        """Start one tiny jail the way the pool's jails will start; raise
        JailUnavailable, with the words of what refused, if it fails. With
        ``template_command`` (forked jails), the jail is forked from the template that
        runs it, which is started here once for every jail to come, and whose jails,
        given only the role ``check``, write ``ok`` on it and end; else bubblewrap
        runs the interpreter."""
        jail = self.jail()
        try:
            if template_command is not None:
                rc, err = await self._check_forked(jail, self.template(template_command))
            else:
                rc, err = await self._check_bwrap(jail)
        except (OSError, TimeoutError) as exc:
            await self._close_after_failed_check(template_command)
            raise JailUnavailable(f"a test jail could not run: {exc}") from None
        finally:
            await jail.close()
        if rc != 0:
            # no pool starts on a host that failed it: the template it started goes now,
            # not with the event loop (whose end would find its pipes still open)
            await self._close_after_failed_check(template_command)
            hint = ""
            if b"Permission denied" in err or b"Can't find source path" in err:
                hint = (
                    f" (the jail user cannot reach {', '.join(self.runtime.ro_paths)}: "
                    "run scripts/setup.sh, which grants it search permission)"
                )
            raise JailUnavailable(
                f"a test jail failed (status {rc}): {err.decode(errors='replace').strip()}{hint}"
            )

    async def _close_after_failed_check(self, template_command: Sequence[str] | None) -> None:
        if template_command is not None:
            await self.close_templates()

    async def _check_bwrap(self, jail: Jail) -> tuple[int, bytes]:
        proc = await jail.start(
            self.python("-c", "import sandbox"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stdin and proc.stderr
        proc.stdin.close()
        err = await asyncio.wait_for(proc.stderr.read(4096), 30)
        return await proc.wait(), err

    async def _check_forked(self, jail: Jail, template: JailTemplate) -> tuple[int, bytes]:
        said_r, said_w = os.pipe()
        try:
            try:
                proc = await jail.start_forked(template, {"check": said_w})
            finally:
                os.close(said_w)
            err = await asyncio.wait_for(proc.stderr.read(4096), 30)
            rc = await asyncio.wait_for(proc.wait(), 30)
            said = os.read(said_r, 16)  # every writer is gone with the jail: no wait
        finally:
            os.close(said_r)
        if rc == 0 and said != b"ok":
            return 1, err + f"the jail's command ended without saying it ran ({said!r})".encode()
        return rc, err

    def describe(self) -> dict[str, Any]:
        uids = [uid for uid, _ in self.users] or [os.geteuid()]
        return {
            "bwrap": self.bwrap,
            "uid": uids[0] if len(uids) == 1 else f"{min(uids)}-{max(uids)}",
            "slots": self.slots,
            "cgroups": self.cgroups.kind,
            "bound": list(self.runtime.ro_paths),
        }


class Jail:
    """One jail: at most one bubblewrap process tree, its cgroup and its CPUs."""

    def __init__(self, jailer: Jailer) -> None:
        self._jailer = jailer
        self.cpus = jailer.next_cpus()
        self.cgroup: JailCgroup | None = None
        #: bubblewrap (``start``) or a forked jail's monitor (``start_forked``)
        self.proc: asyncio.subprocess.Process | ForkedJail | None = None
        #: the host (uid, gid) its processes run as (None: jaxplay's own)
        self.user: tuple[int, int] | None = None
        self._killed = False
        self._oom_base = 0
        #: started ahead of need: the least CPU weight (``run_in_background``)
        self.background = False
        #: set once a forked jail's spawn has answered (close waits for it: the jail's
        #: monitor may be joining the cgroup that close would otherwise remove under it)
        self._spawning: asyncio.Event | None = None

    async def start_forked(self, template: JailTemplate, fds: Mapping[str, int]) -> ForkedJail:
        """Start the template's command in this jail, forked from ``template`` (a jail
        at the price of a fork: sandbox/jail/enter.py builds the same jail as
        ``start``'s bubblewrap, and joins the cgroup before it drops the template's uid)."""
        jailer, limits = self._jailer, self._jailer.limits
        self.user = await jailer.take_user()
        if self._killed:
            jailer.release_user(self.user)
            self.user = None
            raise OSError("the jail was killed before it started")
        self.cgroup = jailer.cgroups.make(limits, self.cpus, self.background)
        spec = jail_spec(
            jailer.runtime,
            limits,
            user=self.user,
            cgroup_procs=self.cgroup.procs_files() if self.cgroup is not None else (),
            # never the template's own (one CPU): unpinned, a jail has all of ours
            cpus=self.cpus if self.cpus is not None else jailer.cpus,
            env=jailer.env,
            devices=jailer.devices,
            mask_proc=jailer.hardening.mask_proc,
        )
        seccomp = filter_fd(jailer.hardening.strict_seccomp)
        self._spawning = asyncio.Event()
        try:
            proc = await template.spawn(spec, seccomp, fds)
        finally:
            os.close(seccomp)
            self._spawning.set()
        self.proc = proc
        if self.cgroup is not None:
            self._oom_base = self.cgroup.oom_kills()
        if self._killed:
            self.kill()
        return proc

    def template(self, command: Sequence[str]) -> JailTemplate:
        return self._jailer.template(command)

    async def start(
        self,
        command: Sequence[str],
        *,
        pass_fds: Sequence[int] = (),
        stdout: Any = asyncio.subprocess.PIPE,
        stderr: Any = asyncio.subprocess.PIPE,
        env: Mapping[str, str] | None = None,
        limit: int = 2**16,
    ) -> asyncio.subprocess.Process:
        """Start ``command`` in the jail. Its stdin is the returned process's stdin."""
        jailer, limits = self._jailer, self._jailer.limits
        self.user = await jailer.take_user()
        if self._killed:  # retired while it waited for a uid: make nothing
            jailer.release_user(self.user)
            self.user = None
            raise OSError("the jail was killed before it started")
        self.cgroup = jailer.cgroups.make(limits, self.cpus, self.background)
        seccomp = filter_fd(jailer.hardening.strict_seccomp)
        try:
            argv = self._limits_argv() + bwrap_argv(
                jailer.bwrap,
                jailer.runtime,
                limits,
                command,
                seccomp_fd=seccomp,
                env={**jailer.env, **(env or {})},
                devices=jailer.devices,
                mask_proc=jailer.hardening.mask_proc,
            )
            if self.user is not None:
                # after the gate, in the cgroup: this process's own uid can move it there
                assert jailer.setpriv is not None
                argv = launcher_argv(jailer.setpriv, *self.user) + argv
            proc = await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", _GATE, "jaxplay-jail", *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=stdout,
                stderr=stderr,
                env=LAUNCH_ENV,
                pass_fds=(seccomp, *pass_fds),
                start_new_session=True,
                cwd="/",
                limit=limit,
            )  # fmt: skip
        finally:
            os.close(seccomp)
        self.proc = proc
        try:
            if self.cgroup is not None:
                self.cgroup.add(proc.pid)
                self._oom_base = self.cgroup.oom_kills()
        except OSError:
            self.kill()
            raise
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        return proc

    def _limits_argv(self) -> list[str]:
        """prlimit and taskset, run by the jail's own uid before bwrap: lowering one's
        own limits needs no privilege (root here may lack CAP_SYS_RESOURCE)."""
        limits = self._jailer.limits
        argv = [
            "prlimit",
            f"--data={limits.data_bytes}:{limits.data_bytes}",
            f"--fsize={limits.fsize_bytes}:{limits.fsize_bytes}",
            f"--nofile={limits.nofile}:{limits.nofile}",
            f"--nproc={limits.nproc}:{limits.nproc}",
            f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
            "--core=0:0",
            "--",
        ]
        if self.cpus is not None:
            argv += ["taskset", "--cpu-list", ",".join(map(str, self.cpus))]
        return argv

    def run_in_background(self, background: bool) -> None:
        """Whether the jail's processes take only the CPU that jails running someone's
        code leave (its cgroup's weight; before it starts, from its start on). A pool
        starts a spare so while another is ready, and sets it back once the spare is
        needed: no run is ever made in a jail left in the background."""
        if background != self.background:
            self.background = background
            if self.cgroup is not None:  # else its cgroup is made so (Cgroups.make)
                with contextlib.suppress(OSError):
                    self.cgroup.set_background(background)

    def move_to(self, cpus: list[int]) -> bool:
        """Put the jail on ``cpus`` (as many as it has). Before it starts: its cgroup
        and taskset will use them. Once its command runs (past taskset, which would
        refuse CPUs outside the cpuset): the cgroup's cpuset moves every thread at
        once. False where that cannot be done (no cpuset cgroup): it stays put."""
        if self.cpus is None or len(cpus) != len(self.cpus):
            return False
        if self.proc is None and self.cgroup is None:
            self.cpus = list(cpus)
            return True
        if self.cgroup is None:
            return False
        try:
            moved = self.cgroup.set_cpus(cpus)
        except OSError:
            return False
        if moved:
            self.cpus = list(cpus)
        return moved

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer struck in this jail since it started."""
        return self.cgroup is not None and self.cgroup.oom_kills() > self._oom_base

    def kill(self) -> None:
        """SIGKILL the whole jail, now. Safe to call at any time, any number of times."""
        self._killed = True
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            if isinstance(self.proc, ForkedJail):  # before its setsid, it leads no group
                self.proc.kill()
        if self.cgroup is not None:
            self.cgroup.kill()

    async def wait_gone(self, timeout_s: float = TEARDOWN_S) -> bool:
        """Wait until bubblewrap has exited and nothing is left in the cgroup."""
        if self.proc is not None:
            try:
                await asyncio.wait_for(self.proc.wait(), timeout_s)
            except TimeoutError:
                return False
        if self.cgroup is not None:
            return await self.cgroup.wait_empty(timeout_s)
        return True

    async def close(self) -> None:
        """Kill everything, wait for it to be gone, remove the cgroup, free the uid."""
        self.kill()
        if self._spawning is not None and not self._spawning.is_set():
            await self._spawning.wait()  # the template's answer: then its monitor is known
            self.kill()
        if not await self.wait_gone():
            self.kill()
            if not await self.wait_gone():
                log.error(
                    "jail %s: processes survive SIGKILL; cgroup and uid %s left in use",
                    self.cgroup,
                    self.user,
                )
                return
        if self.cgroup is not None:
            self.cgroup.remove()
        self._jailer.release_user(self.user)
        self.user = None
