#!/usr/bin/env bash
# Private redis-server and PostgreSQL for trying the scaled topology on one machine
# without Docker (docs/deploy.md), from Debian's packages (apt-get install
# redis-server postgresql). They live in $JAXPLAY_SERVICES_DIR (default
# /tmp/jaxplay-services), listen on loopback only, and touch no system-wide instance.
# The tests (tests/support/services.py) start instances of their own and do not need this.
#
#   scripts/services.sh start    # start both; print the JAXPLAY_* settings to use
#   scripts/services.sh env      # print them again (eval "$(scripts/services.sh env)")
#   scripts/services.sh status
#   scripts/services.sh stop     # stop both (the data stays; `clean` removes it)
#   scripts/services.sh clean
set -euo pipefail

DIR=${JAXPLAY_SERVICES_DIR:-/tmp/jaxplay-services}
REDIS_PORT=${JAXPLAY_REDIS_PORT:-6390}
PG_PORT=${JAXPLAY_PG_PORT:-5490}
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)

die() { echo "services: $*" >&2; exit 1; }

# PostgreSQL refuses to run as root: as root, run its tools as the postgres user.
as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

env_lines() {
    echo "export JAXPLAY_QUEUE_URL=redis://127.0.0.1:$REDIS_PORT/0"
    echo "export JAXPLAY_DATABASE_URL=postgresql://postgres@127.0.0.1:$PG_PORT/jaxplay"
}

start_redis() {
    command -v redis-server >/dev/null || die "redis-server is missing: apt-get install redis-server"
    mkdir -p "$DIR/redis"
    if redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
        echo "services: redis already answers on $REDIS_PORT"
        return
    fi
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$DIR/redis" \
        --appendonly yes --save "" --daemonize yes \
        --pidfile "$DIR/redis/redis.pid" --logfile "$DIR/redis/redis.log"
    for _ in $(seq 50); do
        redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && return
        sleep 0.1
    done
    die "redis did not start (see $DIR/redis/redis.log)"
}

start_postgres() {
    [ -n "$PG_BIN" ] || die "PostgreSQL is missing: apt-get install postgresql"
    mkdir -p "$DIR/pg"
    if [ "$(id -u)" = 0 ]; then chown postgres "$DIR/pg"; chmod 755 "$DIR"; fi
    if [ ! -f "$DIR/pg/data/PG_VERSION" ]; then
        as_pg "$PG_BIN/initdb" -D "$DIR/pg/data" -U postgres --auth=trust -E UTF8 \
            --no-instructions >/dev/null
    fi
    if ! as_pg "$PG_BIN/pg_ctl" -D "$DIR/pg/data" status >/dev/null 2>&1; then
        as_pg "$PG_BIN/pg_ctl" -D "$DIR/pg/data" -l "$DIR/pg/pg.log" -w \
            -o "-p $PG_PORT -k $DIR/pg -c listen_addresses=127.0.0.1" start >/dev/null
    fi
    as_pg "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'jaxplay'" | grep -q 1 \
        || as_pg "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres jaxplay
}

stop_all() {
    if [ -f "$DIR/redis/redis.pid" ]; then
        redis-cli -p "$REDIS_PORT" shutdown >/dev/null 2>&1 || true
    fi
    if [ -n "$PG_BIN" ] && [ -f "$DIR/pg/data/postmaster.pid" ]; then
        as_pg "$PG_BIN/pg_ctl" -D "$DIR/pg/data" -m fast -w stop >/dev/null || true
    fi
}

case "${1:-}" in
    start)
        start_redis
        start_postgres
        echo "services: redis on 127.0.0.1:$REDIS_PORT, PostgreSQL on 127.0.0.1:$PG_PORT; use:"
        env_lines
        ;;
    env) env_lines ;;
    status)
        redis-cli -p "$REDIS_PORT" ping 2>/dev/null | sed "s/^/redis $REDIS_PORT: /" || echo "redis: down"
        if [ -n "$PG_BIN" ] && [ -d "$DIR/pg/data" ]; then
            as_pg "$PG_BIN/pg_ctl" -D "$DIR/pg/data" status | head -n 1
        else
            echo "postgres: not set up"
        fi
        ;;
    stop) stop_all ;;
    clean) stop_all; rm -rf "$DIR" ;;
    *) die "usage: $0 start|env|status|stop|clean" ;;
esac
