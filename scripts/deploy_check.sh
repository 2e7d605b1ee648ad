#!/usr/bin/env bash
# `make deploy-check`: builds every image in docker/ and runs docker/compose.yaml's
# stack end to end (tests/deploy): a run through nginx -> a server replica -> Redis ->
# a jailed CPU worker, a worker killed mid-run, a snippet shared and reopened, Redis's
# ACL users. The stack listens on 127.0.0.1 only (docker/compose.check.yaml).
#
# What it needs, and installs where it can (root with apt-get): Debian's docker.io
# (the engine, started here if none runs), mmdebstrap (the images' base) and
# apparmor (its parser checks the workers' profile); Docker
# Compose v2, taken from Debian 13's docker-compose package when the machine has no
# v2 (Debian 12 has only v1, which cannot read compose.yaml). Without a container
# engine and no way to install one it skips, saying so, unless
# JAXPLAY_DEPLOY_CHECK=require (CI), where it fails.
#
#   JAXPLAY_DEPLOY_IMAGES   the targets to build (default: all of docker/Dockerfile's)
#   JAXPLAY_DEPLOY_KEEP=1   leave the stack running afterwards (to look at it)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build/deploy
PROJECT=jaxplay-check
REQUIRE=${JAXPLAY_DEPLOY_CHECK:-}
t_start=$(date +%s)
say() { echo "deploy-check: $*" >&2; }
die() { say "$*"; exit 1; }
skip() {
    if [ "$REQUIRE" = require ]; then die "JAXPLAY_DEPLOY_CHECK=require, but $*"; fi
    say "SKIPPED: $*"
    exit 0
}
mkdir -p "$OUT/bin"

# --- a container engine -----------------------------------------------------------
can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
# to compile the workers' AppArmor profile (tests/deploy), where no kernel loads it
command -v apparmor_parser >/dev/null || missing+=(apparmor)
if [ ${#missing[@]} -gt 0 ]; then
    can_apt || skip "${missing[*]} missing and this is not root with apt-get to install them"
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Debian's client, which speaks the engine's API version
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER=$(command -v docker)
export DOCKER
started_engine=
if ! "$DOCKER" info >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || skip "no Docker engine runs and only root can start one"
    say "starting dockerd (log: $OUT/dockerd.log)"
    # No bridge and no iptables: every container of the check uses the host's network.
    dockerd --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
        --pidfile "$OUT/dockerd.pid" >"$OUT/dockerd.log" 2>&1 &
    started_engine=$!
    for _ in $(seq 60); do
        "$DOCKER" info >/dev/null 2>&1 && break
        kill -0 "$started_engine" 2>/dev/null || break
        sleep 0.5
    done
    "$DOCKER" info >/dev/null 2>&1 || {
        tail -n 20 "$OUT/dockerd.log" >&2
        skip "dockerd would not start here (see $OUT/dockerd.log)"
    }
fi

# --- Docker Compose v2 --------------------------------------------------------------
compose_v2() { "$1" version 2>/dev/null | grep -qE 'version v?2\.'; }
COMPOSE=
for candidate in "$OUT/bin/docker-compose" /usr/libexec/docker/cli-plugins/docker-compose \
    "$(command -v docker-compose || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] && compose_v2 "$candidate"; then
        COMPOSE=$candidate
        break
    fi
done
if [ -z "$COMPOSE" ]; then
    can_apt || skip "Docker Compose v2 is missing"
    say "fetching Docker Compose v2 from Debian 13's docker-compose package"
    # Debian 13's package list, read into a private directory: the machine's own apt
    # sources and installed packages are left alone.
    apt_dir=$(mktemp -d)
    echo "deb ${DEBIAN_MIRROR:-http://deb.debian.org/debian} trixie main" >"$apt_dir/sources.list"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
        -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
    apt-get "${apt_opts[@]}" update -qq
    (cd "$apt_dir" && apt-get "${apt_opts[@]}" download docker-compose >/dev/null)
    dpkg -x "$apt_dir"/docker-compose_*.deb "$apt_dir/x"
    cp "$apt_dir/x/usr/libexec/docker/cli-plugins/docker-compose" "$OUT/bin/docker-compose"
    rm -rf "$apt_dir"
    COMPOSE=$OUT/bin/docker-compose
    compose_v2 "$COMPOSE" || die "$COMPOSE is not Docker Compose v2"
fi

# --- the ports the stack listens on must be free -----------------------------------
for port in 8000 8001 8002 6379 5432; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        die "127.0.0.1:$port is taken: the stack listens there (stop what uses it)"
    fi
done

# --- the images -----------------------------------------------------------------------
t0=$(date +%s)
# shellcheck disable=SC2086
docker/build.sh ${JAXPLAY_DEPLOY_IMAGES:-}
t_build=$(($(date +%s) - t0))

# --- the stack ------------------------------------------------------------------------
t0=$(date +%s)
# fresh passwords for this run; nothing is stored
password() { head -c 24 /dev/urandom | base64 | tr -d '/+='; }
REDIS_SERVER_PASSWORD=$(password)
REDIS_WORKER_PASSWORD=$(password)
POSTGRES_PASSWORD=$(password)
JAXPLAY_SESSION_SECRET=$(password)
export REDIS_SERVER_PASSWORD REDIS_WORKER_PASSWORD POSTGRES_PASSWORD JAXPLAY_SESSION_SECRET
docker/delegate-cgroups.sh "$OUT/cgroups.yaml" worker-1 worker-2
compose=("$COMPOSE" --project-name "$PROJECT" --project-directory docker
    -f docker/compose.yaml -f docker/compose.check.yaml -f "$OUT/cgroups.yaml")

cleanup() {
    status=$?
    if [ "$status" != 0 ]; then
        say "failed; the stack's last log lines:"
        "${compose[@]}" logs --no-color --tail 40 >&2 || true
    fi
    if [ "${JAXPLAY_DEPLOY_KEEP:-}" = 1 ]; then
        say "the stack is left running: ${compose[*]} down -v"
    else
        "${compose[@]}" down --volumes --timeout 5 >/dev/null 2>&1 || true
        # the jails' cgroups, then the workers' (only empty cgroups can be removed)
        for d in /sys/fs/cgroup/*/jaxplay-workers/worker-*; do
            [ -d "$d" ] || continue
            find "$d" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
            rmdir "$d" "$(dirname "$d")" 2>/dev/null || true
        done
        if [ -n "$started_engine" ]; then
            kill "$started_engine" 2>/dev/null && wait "$started_engine" 2>/dev/null || true
        fi
    fi
    exit "$status"
}
trap cleanup EXIT

"${compose[@]}" down --volumes --timeout 5 >/dev/null 2>&1 || true
"${compose[@]}" up --detach --wait --no-build --quiet-pull
t_up=$(($(date +%s) - t0))

t0=$(date +%s)
JAXPLAY_DEPLOY_URL=http://127.0.0.1:8000 \
    JAXPLAY_DEPLOY_COMPOSE="${compose[*]}" \
    JAXPLAY_DEPLOY_CGROUPS=/sys/fs/cgroup \
    .venv/bin/python -m pytest -q -p no:cacheprovider tests/deploy
t_tests=$(($(date +%s) - t0))
say "passed: images ${t_build} s, stack up ${t_up} s, tests ${t_tests} s, all $(($(date +%s) - t_start)) s"
