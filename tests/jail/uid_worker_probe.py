"""Run by tests/jail/test_jail_uids.py as a worker container's worker runs: an
unprivileged uid holding CAP_SETUID, CAP_SETGID and CAP_KILL as ambient capabilities
(docker/worker-entrypoint.sh). Starts two jails on numbered uids, one holding every
inotify instance its uid may have while the other makes one, prints a JSON line
with what each jail's processes are (seen from outside, as far as this uid may
see), waits for a line on stdin (the test looks meanwhile, as root), closes the
jails and prints a last JSON line.

    python -m tests.jail.uid_worker_probe UID_BASE CGROUP_ROOT
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from sandbox.jail.jail import Jail, Jailer
from sandbox.jail.settings import JailConfig
from sandbox.jail.uids import Capabilities

INOTIFY = "import ctypes, errno, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n"
HOG = INOTIFY + (
    "held = []\n"
    "while len(held) < 4096:\n"
    "    fd = libc.inotify_init1(0)\n"
    "    if fd < 0:\n"
    "        break\n"
    "    held.append(fd)\n"
    "print('HELD', len(held), errno.errorcode.get(ctypes.get_errno()), flush=True)\n"
    "sys.stdin.readline()\n"
)
OTHER = INOTIFY + (
    "fd = libc.inotify_init1(0)\n"
    "print('MADE', fd, errno.errorcode.get(ctypes.get_errno()) if fd < 0 else 'ok', flush=True)\n"
    "sys.stdin.readline()\n"
)


def _tree(pid: int) -> list[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return [pid]
    return [pid, *(p for k in kids for p in _tree(int(k)))]


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def _seen_from_outside(jail: Jail) -> list[dict[str, Any]]:
    assert jail.proc is not None
    pids = sorted(jail.cgroup.pids()) if jail.cgroup is not None else _tree(jail.proc.pid)
    found = []
    for pid in pids:
        status = _status(pid)
        found.append(
            {
                "pid": pid,
                "uids": sorted({int(u) for u in status["Uid"].split()}),
                "caps": {k: int(v, 16) for k, v in status.items() if k.startswith("Cap")},
            }
        )
    return found


async def main(uid_base: int, cgroup_root: str) -> None:
    jailer = Jailer(
        config=JailConfig(jail_uid_base=uid_base, jail_slots=2, cgroup_root=cgroup_root)
    )
    report: dict[str, Any] = {
        "uid": os.getuid(),
        "caps": vars(Capabilities.of()),
        "users": jailer.users,
        "cgroups": jailer.cgroups.kind,
        "jails": [],
    }
    jails = [jailer.jail(), jailer.jail()]
    lines = []
    for jail, code in zip(jails, (HOG, OTHER), strict=True):
        proc = await jail.start(jailer.python("-c", code))
        assert proc.stdout is not None
        lines.append((await asyncio.wait_for(proc.stdout.readline(), 30)).decode().split())
    for jail, line in zip(jails, lines, strict=True):
        report["jails"].append(
            {"user": jail.user, "said": line, "processes": _seen_from_outside(jail)}
        )
    print(json.dumps(report), flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    closed = []
    for jail in jails:
        cgroup = jail.cgroup
        await jail.close()  # SIGKILL from outside: another uid's processes
        closed.append(
            jail.proc is not None
            and jail.proc.returncode is not None
            and (cgroup is None or not cgroup.main.exists())
        )
    print(json.dumps({"closed": closed}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
