"""Whether this process may launch each jail as a host uid of its own, and how.

Each jail runs as a uid no other live jail has, so that per-uid kernel counters
(RLIMIT_NPROC, inotify instances, pending signals) are never shared between
tenants. That takes three capabilities: CAP_SETUID and CAP_SETGID, to set the
jail's uid and gid, and CAP_KILL, to kill the processes of another uid. On a host
jaxplay runs as root, which has them; in a worker container it runs as an
unprivileged user that holds exactly these three, as ambient capabilities
(docker/worker-entrypoint.sh). So the test is the capabilities, never uid 0.

How a jail is launched with them: the launcher, ``/bin/sh``, starts as jaxplay's
own uid (so that this process may put it into the jail's cgroup: cgroup v1 lets a
non-root process move only processes of its own uid) and, once in, ``exec``s
``setpriv``, which sets the jail's uid, gid and no supplementary groups, clears the
inheritable and ambient capabilities and sets no-new-privileges before it
``exec``s the rest. Nothing after that exec holds any capability: a process of a
non-root uid keeps capabilities across ``exec`` only as ambient ones.
"""

from __future__ import annotations

from dataclasses import dataclass

CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7
#: What launching jails as other uids takes, by name (capabilities(7)).
NEEDED = {"CAP_SETUID": CAP_SETUID, "CAP_SETGID": CAP_SETGID, "CAP_KILL": CAP_KILL}
#: Those the launcher itself needs once it has ``exec``ed (setpriv sets uid and gid).
LAUNCHER_NEEDS = ("CAP_SETUID", "CAP_SETGID")


@dataclass(frozen=True)
class Capabilities:
    """A process's capability sets, as /proc/PID/status shows them (bit masks)."""

    inheritable: int
    permitted: int
    effective: int
    bounding: int
    ambient: int

    @classmethod
    def parse(cls, status: str) -> Capabilities:
        """From the text of /proc/PID/status."""
        found = {}
        for line in status.splitlines():
            key, _, value = line.partition(":")
            if key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                found[key] = int(value.strip(), 16)
        missing = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} - set(found)
        if missing:
            raise ValueError(f"no {', '.join(sorted(missing))} in the process status")
        return cls(
            found["CapInh"], found["CapPrm"], found["CapEff"], found["CapBnd"], found["CapAmb"]
        )

    @classmethod
    def of(cls, pid: int | str = "self") -> Capabilities:
        with open(f"/proc/{pid}/status") as f:
            return cls.parse(f.read())

    def holds(self, names: tuple[str, ...] | list[str], which: str = "effective") -> list[str]:
        """Those of ``names`` (keys of NEEDED) that the set ``which`` holds."""
        mask: int = getattr(self, which)
        return [n for n in names if mask >> NEEDED[n] & 1]


def can_switch_uids(caps: Capabilities, euid: int) -> bool:
    """True: this process can launch jails as other uids. False: it holds none of
    the capabilities for it (an ordinary user: jails run as its own uid).

    ValueError, saying why, where a jail could not be launched as intended: some of
    the capabilities but not all, capabilities that the launcher would lose at its
    ``exec`` (a non-root process passes them on only as ambient capabilities), or
    root without them (jails would run as uid 0, which owns the host's files)."""
    held = caps.holds(list(NEEDED))
    if not held:
        if euid == 0:
            raise ValueError(
                f"jaxplay runs as root without {', '.join(NEEDED)}: its jails would run as "
                "uid 0; give it those capabilities, or run it as an unprivileged user"
            )
        return False
    if len(held) < len(NEEDED):
        lacking = [n for n in NEEDED if n not in held]
        raise ValueError(
            f"jaxplay holds {', '.join(held)} but not {', '.join(lacking)}: it launches each "
            f"jail as its own uid only with all of {', '.join(NEEDED)} (docker/compose.yaml: "
            "cap_add), and runs jails as its own uid with none of them"
        )
    if euid != 0:
        lost = [n for n in LAUNCHER_NEEDS if n not in caps.holds(LAUNCHER_NEEDS, "ambient")]
        if lost:
            raise ValueError(
                f"jaxplay (uid {euid}) holds {', '.join(lost)} but not as ambient capabilities, "
                "so the jail's launcher loses them at exec: start it with setpriv "
                "--ambient-caps (docker/worker-entrypoint.sh)"
            )
    return True


def launcher_argv(setpriv: str, uid: int, gid: int) -> list[str]:
    """What the launcher ``exec``s first: become ``uid``:``gid`` with no capabilities."""
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--ambient-caps=-all",
        "--no-new-privs",
        "--",
    ]
