#!/usr/bin/env bash
# Gives each worker container a cgroup subtree of its own, so that its (unprivileged)
# worker puts every jail in a cgroup with its own memory, pids and CPU limits, as on
# a bare machine. Docker mounts a container's cgroups read-only, so the subtree is
# made here, on the host, owned by the worker's uid, and bound into the container;
# this writes the compose override that binds it.
#
#   docker/delegate-cgroups.sh OVERRIDE.yaml worker-1 worker-2 ...   (as root)
#   docker compose -f docker/compose.yaml -f OVERRIDE.yaml up -d
#
#   WORKER_UID      the workers' uid in their image (10002)
#   WORKER_MEMORY   memory of all the jails of one worker together (6G)
#   WORKER_PIDS     their processes and threads together (4096)
#
# cgroup v1 (memory, pids, cpu and cpuset hierarchies): /sys/fs/cgroup/C/jaxplay-workers/W,
# bound at /run/jaxplay/cgroup/C, which JAXPLAY_CGROUP_ROOT names. In v1 a process may
# move a process of its own uid into a cgroup whose cgroup.procs it may write.
# cgroup v2: not done by this script (docs/deploy.md says how, and what is untested).
set -euo pipefail

[ $# -ge 2 ] || { echo "usage: $0 OVERRIDE.yaml WORKER..." >&2; exit 2; }
override=$1
shift
uid=${WORKER_UID:-10002}
memory=${WORKER_MEMORY:-6G}
pids=${WORKER_PIDS:-4096}
fs=/sys/fs/cgroup
die() { echo "delegate-cgroups: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root: it makes cgroups on the host"
if [ -f "$fs/cgroup.controllers" ]; then
    die "this host has cgroup v2 only; see docs/deploy.md (\"Cgroups for the jails\")"
fi
[ -f "$fs/memory/memory.limit_in_bytes" ] && [ -d "$fs/pids" ] \
    || die "no cgroup v1 memory and pids hierarchies under $fs"

bytes=$(numfmt --from=iec "$memory")
controllers=(memory pids cpu cpuset)
{
    echo "# written by docker/delegate-cgroups.sh: each worker's own cgroup subtree"
    echo "services:"
} >"$override"
for worker in "$@"; do
    echo "  $worker:" >>"$override"
    echo "    environment: { JAXPLAY_CGROUP_ROOT: /run/jaxplay/cgroup }" >>"$override"
    echo "    volumes:" >>"$override"
    for c in "${controllers[@]}"; do
        [ -d "$fs/$c" ] || continue
        top=$fs/$c/jaxplay-workers  # apart from the jail roots of jaxplay run on the host
        dir=$top/$worker
        mkdir -p "$dir"
        if [ "$c" = cpuset ]; then  # v1 cpusets start empty: take the parent's
            for f in cpuset.cpus cpuset.mems; do
                cat "$fs/$c/$f" >"$top/$f"
                cat "$top/$f" >"$dir/$f"
            done
        fi
        case $c in
            memory) echo "$bytes" >"$dir/memory.limit_in_bytes" ;;
            pids) echo "$pids" >"$dir/pids.max" ;;
            # the jails weigh a process per CPU, not one process for them all, against
            # the host's other processes (sandbox/jail/cgroups.py jails_weight)
            cpu) for d in "$top" "$dir"; do echo $((1024 * $(nproc))) >"$d/cpu.shares"; done ;;
        esac
        # the worker makes a cgroup per jail in it and moves the jail there; the
        # limits above stay root's
        chown "$uid" "$dir"
        echo "      - $dir:/run/jaxplay/cgroup/$c" >>"$override"
    done
done
echo "delegate-cgroups: ${*} get their own cgroups (v1) under $fs/*/jaxplay-workers; override: $override" >&2
