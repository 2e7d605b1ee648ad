#!/bin/sh
# PostgreSQL for snippets and cached results (docker/compose.yaml), from Debian's
# package: on first start it makes the cluster, the user and the database; then it
# runs in the foreground. Clients must give the password (scram-sha-256).
#
#   POSTGRES_PASSWORD  the password of the user `jaxplay` (required)
#   POSTGRES_LISTEN    listen_addresses (*)
#   POSTGRES_PORT      5432
set -eu

if [ "${#POSTGRES_PASSWORD}" -lt 8 ]; then
    echo "jaxplay-postgres: set POSTGRES_PASSWORD (8 characters or more)" >&2
    exit 2
fi
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
data=/var/lib/postgresql/data/pgdata
if [ ! -s "$data/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf %s "$POSTGRES_PASSWORD" >"$pwfile"
    "$bin/initdb" -D "$data" -U jaxplay --pwfile="$pwfile" --auth=scram-sha-256 \
        -E UTF8 --locale=C.UTF-8 --no-instructions >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$data/pg_hba.conf"
    # the database, made by a server that listens on its socket only
    "$bin/pg_ctl" -D "$data" -w -o "-c listen_addresses='' -k /run/postgresql" start >/dev/null
    PGPASSWORD=$POSTGRES_PASSWORD "$bin/createdb" -h /run/postgresql -U jaxplay jaxplay
    "$bin/pg_ctl" -D "$data" -w -m fast stop >/dev/null
fi
# jit off: its LLVM is left out of the image (docker/build.sh)
exec "$bin/postgres" -D "$data" -k /run/postgresql -c jit=off \
    -c "listen_addresses=${POSTGRES_LISTEN:-*}" -c "port=${POSTGRES_PORT:-5432}"
