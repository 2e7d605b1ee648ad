"""The jail's settings: every limit is one field with a default and a line of help.

Each field is ``JAXPLAY_<FIELD>``. The program reads them once at start-up
(sandbox/assembly/settings.py composes every part of the sandbox; the server's settings hold
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
        "Upper bound on a run's wall clock; a request's `timeout_s` is capped by it. At "
        "the end the whole jail is SIGKILLed (an infinite `lax.while_loop` under `jit` "
        "ignores every other signal) and `done` says `timeout`, `wall clock N s`.",
    )
    memory_bytes: int = setting(
        2 * GiB,
        "Memory of one jail (its zygote and the run together): cgroup `memory.max` (v2) "
        "or `memory.limit_in_bytes` (v1); swap capped at 0 where the host allows. Tmpfs "
        "files count. The OOM killer's work is reported as `done` `killed`, `memory 2 GiB`.",
        size=True,
    )
    data_bytes: int = setting(
        2 * GiB,
        "RLIMIT_DATA of every process in the jail: the second line behind the cgroup, "
        "which gives a clean `MemoryError` / `RESOURCE_EXHAUSTED`. **RLIMIT_AS is never "
        "set**: XLA reserves about 1.5 GiB of address space and aborts uncatchably under it.",
        size=True,
    )
    pids: int = setting(
        128,
        "cgroup `pids.max` of one jail: processes and threads together. XLA starts about "
        "9 + 4×CPUs threads; 16 crashes it.",
    )
    nproc: int = setting(
        4096,
        "RLIMIT_NPROC: processes and threads per host uid — per jail when each jail has "
        "its own uid (`JAXPLAY_JAIL_SLOTS`), else over all jails. The finer per-jail "
        "limit is the pids cgroup; without cgroups this is the fork bound (lower it "
        "towards `JAXPLAY_PIDS` there).",
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
        1,
        "CPUs one jail may use: its affinity (`taskset`; XLA sizes its thread pools by "
        "it), its cpuset and its CPU quota. A jail starts on the next CPUs in turn; before "
        "each run the pool moves it (its cpuset: every thread at once) to CPUs no other "
        "run is using, so two runs never share a CPU while another idles. 0: all CPUs, "
        "no quota.",
    )
    tmp_bytes: int = setting(64 * MiB, "Size of the jail's private `/tmp` (tmpfs).", size=True)
    shm_bytes: int = setting(8 * MiB, "Size of the jail's `/dev/shm` (tmpfs).", size=True)
    compile_cache_bytes: int = setting(
        32 * MiB,
        "Size of the tenant's compilation cache, a tmpfs of the jail's own at "
        "`/var/cache/jaxplay-xla`, kept between its runs; 0 = none (docs/sandbox.md, Cost).",
        size=True,
    )
    output_bytes: int = setting(
        1 * MiB,
        "User output (stdout + stderr) of one run; past it the run is killed and `done` "
        "says `killed`, `output 1 MiB`.",
        size=True,
    )
    event_bytes: int = setting(
        64 * MiB,
        "All events of one run (texts of jaxprs, HLO, values); past it the run is killed "
        "(`results over 64 MiB`). A single event line over 16 MiB is refused the same way.",
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
        "When jaxplay may switch uids (root, or CAP_SETUID, CAP_SETGID and CAP_KILL: a "
        "worker container): the group of the jail users, and their names' stem "
        "(`jaxplay-sandbox-0`...), created by `scripts/setup.sh`. Without those "
        "capabilities jails run as jaxplay's own uid.",
    )
    jail_slots: int = setting(
        128,
        "When jaxplay may switch uids: how many jails may exist at once on this host, each "
        "launched as its own uid, so that per-uid kernel counters (processes, inotify "
        "instances, pending signals) are per jail: the user `JAXPLAY_JAIL_USER-N` (created "
        "by `scripts/setup.sh`, which reads the same variable), or "
        "`JAXPLAY_JAIL_UID_BASE + N`. The pool holds no more zygotes. 0: every jail runs "
        "as `JAXPLAY_JAIL_USER` (or the uid `JAXPLAY_JAIL_UID_BASE`), sharing the per-uid "
        "counters.",
    )
    jail_uid_base: int = setting(
        0,
        "When jaxplay may switch uids: numeric jail uids `JAXPLAY_JAIL_UID_BASE` … "
        "`+ JAXPLAY_JAIL_SLOTS - 1` instead of the named users; none may be a user of the "
        "system (checked), and nothing else on the host may use them (not checkable from a "
        "container: reserve the range). Their gid is the group `JAXPLAY_JAIL_USER` where "
        "it exists, else each uid's own number. A worker container's way (its image has no "
        "slot users); every worker on one host needs a range of its own "
        "(docker/compose.yaml, docs/sandbox.md). 0: the named users.",
    )
    cgroup_root: str = setting(
        "",
        "Where per-jail cgroups are made. Empty: cgroup v2 → `/sys/fs/cgroup/jaxplay` "
        "(root or a delegated subtree); v1 → `<own cgroup>/jaxplay` in each controller; "
        "`none` → rlimits only (degraded).",
    )
    fork_jails: bool = setting(
        True,
        "A zygote's jail is forked from a template process of its JAX version, which "
        "imported JAX and the libraries once and never runs anyone's code, and builds "
        "itself (the same namespaces, mounts, uid, cgroup, rlimits and seccomp filter as "
        "bubblewrap's jail: sandbox/jail/enter.py): tens of milliseconds instead of a new "
        "interpreter's import of JAX (~2 CPU-s). Off: every zygote's jail is a new "
        "bubblewrap and interpreter, as before (to measure, or where the template cannot "
        "run).",
    )
    unsafe_no_jail: bool = setting(
        False,
        "Development only: allow user code to run **without** a jail (the `subprocess` "
        "pool, or `auto` where bubblewrap is missing or unusable): it then runs with the "
        "server's rights. Logged loudly. Never on a server others can reach.",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JailConfig:
        return read_env(cls, environ)
