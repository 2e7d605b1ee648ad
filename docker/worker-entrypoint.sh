#!/bin/sh
# The worker images' entrypoint (docker/Dockerfile). docker/compose.yaml starts a
# worker container as root with no capability but CAP_SETUID, CAP_SETGID and
# CAP_KILL (cap_drop ALL, cap_add those three, no-new-privileges). This drops to
# the unprivileged user jaxplay-worker at once, keeping exactly those three as
# ambient capabilities, so that the worker launches each jail as a host uid of its
# own (JAXPLAY_JAIL_UID_BASE + slot) and can kill it: per-uid kernel counters
# (processes, inotify instances, pending signals) are then per jail, not shared by
# every tenant of the container. The jails themselves hold no capability
# (sandbox/jail/uids.py: setpriv clears them before anything of a jail runs).
#
# Started as a user instead (docker run --user jaxplay-worker), it runs the command
# as that user, without capabilities: its jails then share that uid (docs/deploy.md).
set -eu

[ "$#" -gt 0 ] || { echo "worker-entrypoint: no command" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
    exec "$@"
fi
# CAP_KILL (5), CAP_SETGID (6), CAP_SETUID (7): 0xe0
effective=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
if [ $((0x$effective & 0xe0)) -ne $((0xe0)) ]; then
    echo "worker-entrypoint: started as root without CAP_SETUID, CAP_SETGID and CAP_KILL" \
        "(CapEff $effective): add them (docker/compose.yaml: cap_add), or start the" \
        "container as the user jaxplay-worker (its jails then share its uid)" >&2
    exit 1
fi
exec setpriv --reuid=jaxplay-worker --regid=jaxplay-worker --init-groups \
    --inh-caps=-all,+setuid,+setgid,+kill --ambient-caps=-all,+setuid,+setgid,+kill \
    -- "$@"
