"""What this host lacks for the jail: said by a worker that refuses to start because
its jail cannot (issue 50: a TPU VM with no user namespaces, where the worker is not
root).

The jail (sandbox/jail/) builds its sandbox in a new user namespace; bubblewrap run
as root could do without one, jaxplay's forked jails cannot. So a host that refuses
``unshare(CLONE_NEWUSER)`` cannot jail anyone's code, whatever else it has, and a
worker there must refuse to serve (never fall back to running code unjailed). This
module only finds the facts for that refusal's message: it decides nothing.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from sandbox.jail import syscalls

#: the sysctls that turn unprivileged user namespaces off, and the value that does
SYSCTLS = {
    "user.max_user_namespaces": ("user/max_user_namespaces", "0"),
    "kernel.unprivileged_userns_clone": ("kernel/unprivileged_userns_clone", "0"),
    "kernel.apparmor_restrict_unprivileged_userns": (
        "kernel/apparmor_restrict_unprivileged_userns",
        "1",
    ),
}

HOW = (
    "jaxplay's jail needs user namespaces: allow them (sysctl user.max_user_namespaces > 0; "
    "on Debian kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 and later "
    "kernel.apparmor_restrict_unprivileged_userns=0; in a container, a runtime that lets "
    "it make them), or run the worker on a host that does (docs/deploy.md, 'GPU and TPU "
    "workers'). No run is made without the jail."
)


def user_namespace_refused() -> str | None:
    """Why a process here cannot make a user namespace (None: it can). Tried in a
    forked child, which exits at once: this process stays in its own namespace."""
    pid = os.fork()
    if pid == 0:  # the child: try, and say the errno as the exit status
        try:
            syscalls.unshare(syscalls.CLONE_NEWUSER)
        except OSError as exc:
            os._exit(exc.errno or 255)
        except BaseException:
            os._exit(255)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return None
    name = errno.errorcode.get(code, str(code)) if code > 0 else f"signal {-code}"
    return f"unshare(CLONE_NEWUSER) fails with {name} ({os.strerror(code) if code > 0 else name})"


def sysctls_against(proc_sys: Path = Path("/proc/sys")) -> list[str]:
    """The sysctls set to turn user namespaces off (each as ``name = value``)."""
    found = []
    for name, (path, off) in SYSCTLS.items():
        try:
            value = (proc_sys / path).read_text().strip()
        except OSError:
            continue
        if value == off:
            found.append(f"{name} = {value}")
    return found


def missing_for_jail() -> list[str]:
    """What this host lacks for the jail, each with the facts found; empty: nothing
    that this module knows to look for."""
    why = user_namespace_refused()
    if why is None:
        return []
    facts = [why, *sysctls_against()]
    euid = os.geteuid()
    missing = [f"user namespaces ({'; '.join(facts)})"]
    if euid != 0:
        missing.append(f"root (this worker runs as uid {euid})")
    return missing


def refusal(reason: object) -> str:
    """The worker's refusal: the jail's own reason, then what the host lacks, if known."""
    missing = missing_for_jail()
    if not missing:
        return str(reason)
    return f"{reason}. This host cannot jail user code: it lacks {' and '.join(missing)}. {HOW}"
