#!/bin/sh
# The run queue's Redis (docker/compose.yaml): append-only, a memory cap that refuses
# writes instead of evicting queued runs, no default user, and one ACL user each for
# the servers and the workers, with passwords from the environment (only their
# SHA-256 is written down).
#
#   REDIS_SERVER_PASSWORD   user `server`: jaxplay serve replicas
#   REDIS_WORKER_PASSWORD   user `worker`: jaxplay worker machines
#   REDIS_PREFIX            the servers' and workers' JAXPLAY_QUEUE_PREFIX (jaxplay)
#   REDIS_MAXMEMORY         maxmemory (1gb); noeviction: a full Redis refuses new runs
#   REDIS_BIND, REDIS_PORT  where it listens (all addresses, 6379)
set -eu

for name in REDIS_SERVER_PASSWORD REDIS_WORKER_PASSWORD; do
    eval "value=\${$name:-}"
    if [ "${#value}" -lt 16 ]; then
        echo "jaxplay-redis: set $name (16 characters or more)" >&2
        exit 2
    fi
done
p=${REDIS_PREFIX:-jaxplay}
hash() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
dir=/tmp/jaxplay-redis
mkdir -p "$dir" && chmod 700 "$dir"

# Servers: data commands on jaxplay's keys only; nothing that administers Redis.
# Workers: what a worker does and nothing else (sandbox/queue/worker.py). Each
# (...) selector pairs commands with the keys they may touch:
#   their backend's job queues: take, claim, acknowledge, re-queue a job;
#   runs' event streams: append (XADD, never trim or delete) and read the last one;
#   a run's hash: write itself as the owner; cancel flags: read only;
#   its own registration and the set of workers.
cat >"$dir/users.acl" <<EOF
user default off resetkeys -@all
user server on #$(hash "$REDIS_SERVER_PASSWORD") resetkeys ~$p:* resetchannels -@all +@read +@write +@transaction +@connection -@dangerous -@admin -@scripting
user worker on #$(hash "$REDIS_WORKER_PASSWORD") resetkeys resetchannels -@all +ping +time +multi +exec +discard +client|setinfo (+xreadgroup +xack +xdel +xadd +xclaim +xautoclaim +xgroup|create +xgroup|delconsumer +xinfo|consumers +xpending ~$p:jobs:*) (+xadd +expire +xrevrange ~$p:events:*) (+hset +hget +hdel +expire ~$p:run:*) (+exists +mget %R~$p:cancel:*) (+set +del +exists ~$p:worker:*) (+sadd +srem ~$p:workers)
EOF
chmod 600 "$dir/users.acl"

cat >"$dir/redis.conf" <<EOF
port ${REDIS_PORT:-6379}
bind ${REDIS_BIND:-* -::*}
protected-mode no
aclfile $dir/users.acl
dir /data
appendonly yes
appendfsync everysec
save ""
maxmemory ${REDIS_MAXMEMORY:-1gb}
maxmemory-policy noeviction
EOF
exec redis-server "$dir/redis.conf"
