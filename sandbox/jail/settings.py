"""The jail's settings: every limit is one field with a default and a line of help.

Each field is ``JAXPLAY_<FIELD>``. The program reads them once at start-up
(sandbox/settings.py composes every part of the sandbox; the server's settings hold
that) and passes them down; ``from_env()`` is for the sandbox used on its own. This
module stays dependency-free: the jail's runtime has no pydantic to count on.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1 << 40}


def parse_bytes(text: str) -> int:
    """``"2G"``, ``"2GiB"``, ``"512m"``, ``"1048576"`` → bytes (binary units)."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r} (write e.g. 2G, 512M, 1048576)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def setting(default: Any, help: str, *, size: bool = False) -> Any:
    return field(default=default, metadata={"help": help, "size": size})


T = TypeVar("T")

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def parse_value(f: dataclasses.Field[Any], raw: object) -> Any:
    """A field's value from its text (the environment) or a typed value (a flag):
    sizes take ``2G``; booleans only the usual words; anything else is refused."""
    kind = type(f.default)
    if f.metadata.get("size"):
        value = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
        value = parse_bytes(str(raw)) if value is None else value
        if value < 0:
            raise ValueError("a size cannot be negative")
        return value
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        word = str(raw).strip().lower()
        if word not in _TRUE + _FALSE:
            raise ValueError("not a boolean (write 1, true, yes, on or 0, false, no, off)")
        return word in _TRUE
    if kind is int:
        if isinstance(raw, (float, bool)):
            raise ValueError("not an integer")
        return int(raw)  # type: ignore[call-overload]
    if kind is float:
        if isinstance(raw, bool):
            raise ValueError("not a number")
        return float(raw)  # type: ignore[arg-type]
    return str(raw)


def read_env(
    cls: type[T],
    environ: Mapping[str, str] | None,
    prefix: str = "JAXPLAY_",
    overrides: Mapping[str, object] | None = None,
) -> T:
    """``cls`` from ``JAXPLAY_<FIELD>`` variables, ``overrides`` (by field name: flags)
    on top. A bad value raises ``ValueError`` naming the variable and the value."""
    env = os.environ if environ is None else environ
    given = overrides or {}
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = prefix + f.name.upper()
        if f.name in given:
            raw, where = given[f.name], f"{f.name} (flag)"
        elif name in env:
            raw, where = env[name], name
        else:
            continue
        try:
            values[f.name] = parse_value(f, raw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}={raw!r}: {exc}") from None
    return cls(**values)


def describe(cls: type) -> list[tuple[str, Any, str]]:
    """(environment variable, default, help) for every field, for docs and tests."""
    return [
        ("JAXPLAY_" + f.name.upper(), f.default, f.metadata.get("help", ""))
        for f in dataclasses.fields(cls)
    ]


@dataclass(frozen=True)
class JailLimits:
    """Limits enforced on every jail from outside it. Sizes accept ``2G``-style values."""

    max_wall_s: float = setting(
        60.0,
        "Upper bound on a run's wall clock; a request's timeout_s is capped by it. "
        "At the end the whole jail is SIGKILLed.",
    )
    memory_bytes: int = setting(
        2 * GiB,
        "Memory of one jail (its zygote and the run together): cgroup memory.max "
        "(v2) or memory.limit_in_bytes (v1). Swap is capped at 0 where the host allows.",
        size=True,
    )
    data_bytes: int = setting(
        2 * GiB,
        "RLIMIT_DATA of every process in the jail: the second line behind the "
        "cgroup, giving a clean MemoryError / RESOURCE_EXHAUSTED. (RLIMIT_AS is never set: "
        "XLA reserves ~1.5 GiB of address space and aborts under it.)",
        size=True,
    )
    pids: int = setting(
        128,
        "cgroup pids.max of one jail: processes and threads together. XLA starts about "
        "9 + 4 x CPUs threads; 16 crashes it.",
    )
    nproc: int = setting(
        4096,
        "RLIMIT_NPROC: processes and threads counted per host uid: per jail when each "
        "jail has its own uid (JAXPLAY_JAIL_SLOTS), else across all jails. The pids "
        "cgroup is the finer per-jail limit.",
    )
    fsize_bytes: int = setting(
        16 * MiB, "RLIMIT_FSIZE: the largest file a run may write.", size=True
    )
    nofile: int = setting(256, "RLIMIT_NOFILE: open file descriptors per process.")
    cpu_s: int = setting(
        600,
        "RLIMIT_CPU (soft; hard is one more, so the kernel's SIGKILL follows): CPU "
        "seconds of one process, all threads summed. The zygote counts its own too.",
    )
    cpus: int = setting(
        1, "CPUs one jail may use: its affinity, cpuset and CPU quota. 0 = all of them, no quota."
    )
    tmp_bytes: int = setting(64 * MiB, "Size of the jail's private /tmp (tmpfs).", size=True)
    shm_bytes: int = setting(8 * MiB, "Size of the jail's /dev/shm (tmpfs).", size=True)
    compile_cache_bytes: int = setting(
        32 * MiB,
        "Size of the tenant's compilation cache (a tmpfs of the jail's own, kept between "
        "its runs). 0 = no cache.",
        size=True,
    )
    output_bytes: int = setting(
        1 * MiB,
        "User output (stdout + stderr) of one run, after which the run is killed and done says so.",
        size=True,
    )
    event_bytes: int = setting(
        64 * MiB,
        "All events of one run (jaxprs, HLO, values...) after which it is killed.",
        size=True,
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JailLimits:
        return read_env(cls, environ)


@dataclass(frozen=True)
class JailConfig:
    """How jails are made on this host (not limits)."""

    bwrap: str = setting("bwrap", "The bubblewrap executable.")
    jail_user: str = setting(
        "jaxplay-sandbox",
        "When jaxplay may switch uids (root, or CAP_SETUID, CAP_SETGID and CAP_KILL: "
        "a worker container), the name of the unprivileged jail users (created by "
        "scripts/setup.sh). Without those capabilities jails run as jaxplay's own uid.",
    )
    jail_slots: int = setting(
        64,
        "When jaxplay may switch uids: how many jails may exist at once, each launched as "
        "its own uid: the user <JAXPLAY_JAIL_USER>-0 ... -<N-1> (created by "
        "scripts/setup.sh), or JAXPLAY_JAIL_UID_BASE + 0 ... N-1, so that per-uid kernel "
        "counters (processes, inotify instances, pending signals) are per jail. The pool "
        "never holds more zygotes. 0: every jail runs as JAXPLAY_JAIL_USER (or the uid "
        "JAXPLAY_JAIL_UID_BASE) itself, sharing those counters.",
    )
    jail_uid_base: int = setting(
        0,
        "When jaxplay may switch uids: numeric jail uids (and gids) JAXPLAY_JAIL_UID_BASE "
        "... + JAXPLAY_JAIL_SLOTS - 1 instead of the named users, none of which may be a "
        "user of the system. A worker container's (its image has no slot users): each "
        "worker on a host needs a range of its own (docker/compose.yaml). 0: the named users.",
    )
    cgroup_root: str = setting(
        "",
        "Where per-jail cgroups are made. Empty: cgroup v2 -> /sys/fs/cgroup/jaxplay "
        "(needs root or a delegated subtree); v1 -> <own cgroup>/jaxplay in each "
        "controller; 'none' -> rlimits only (degraded).",
    )
    unsafe_no_jail: bool = setting(
        False,
        "Development only: allow user code to run WITHOUT a jail (the `subprocess` pool, "
        "or `auto` where bubblewrap is missing or unusable): it then runs with the "
        "server's rights. Logged loudly. Never on a server others can reach.",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JailConfig:
        return read_env(cls, environ)
