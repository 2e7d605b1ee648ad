#!/usr/bin/env bash
# Sets up everything jaxplay needs on a fresh Debian-like machine: system packages
# (when run as root with apt), a virtual environment in .venv with jaxplay and its
# development tools. Safe to run again: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# chromium + fonts: the browser tests (Playwright drives Debian's chromium).
# bubblewrap + libseccomp2: the jail; acl: setfacl, to let the jail's uid reach the
# Python runtime when it lives under a private directory (see below and docs/sandbox.md).
APT_PACKAGES=(bubblewrap libseccomp2 acl chromium fonts-dejavu-core redis-server postgresql)

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "setup: installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
elif ! command -v bwrap >/dev/null 2>&1; then
    echo "setup: bubblewrap is missing; install it (e.g. apt-get install bubblewrap) to run untrusted code" >&2
fi

# The interpreter of .venv. Its JAX is the default version workers run, so it should
# be one the newest JAX supports (>= 3.12); the server itself runs on any >= 3.11.
# JAXPLAY_PYTHON (or PYTHON) names one; otherwise the newest found of pyenv's and PATH's.
py_minor() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
py_at_least() { "$1" -c "import sys; sys.exit(sys.version_info[:2] < ($2, $3))" 2>/dev/null; }
find_python() {
    local minor candidate
    for minor in 3.13 3.12; do
        for candidate in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$minor".*/bin/python"$minor" \
                2>/dev/null | sort -rV) "$(command -v "python$minor" || true)"; do
            if [ -n "$candidate" ] && [ "$(py_minor "$candidate")" = "$minor" ]; then
                echo "$candidate"
                return
            fi
        done
    done
}
PYTHON=${JAXPLAY_PYTHON:-${PYTHON:-}}
if [ -n "$PYTHON" ]; then
    explicit=1
    if ! py_at_least "$PYTHON" 3 11; then
        echo "setup: JAXPLAY_PYTHON=$PYTHON is not a Python >= 3.11" >&2
        exit 1
    fi
else
    explicit=0
    PYTHON=$(find_python)
    if [ -z "$PYTHON" ]; then
        PYTHON=python3
        if ! py_at_least "$PYTHON" 3 11; then
            echo "setup: no Python >= 3.11 found. Install Python 3.13 (e.g. \`pyenv install 3.13\`," >&2
            echo "       or apt-get install python3.13) and run setup again, or name one with" >&2
            echo "       JAXPLAY_PYTHON=/path/to/python3.13" >&2
            exit 1
        fi
        echo "setup: WARNING: no Python 3.12 or 3.13 found; using $(py_minor "$PYTHON"), so the default" >&2
        echo "       JAX is the newest that version runs (0.10.x on 3.11), not today's. Install" >&2
        echo "       Python 3.13 (e.g. \`pyenv install 3.13\`) and run setup again, or set JAXPLAY_PYTHON." >&2
    fi
fi
if [ -x .venv/bin/python ]; then
    have=$(py_minor .venv/bin/python || echo none)
    want=$(py_minor "$PYTHON")
    # Recreate .venv when it was made with another interpreter than the one named, or
    # (found automatically) with one too old for today's JAX.
    if { [ "$explicit" = 1 ] && [ "$have" != "$want" ]; } ||
        { [ "$explicit" = 0 ] && ! py_at_least .venv/bin/python 3 12 && py_at_least "$PYTHON" 3 12; }; then
        echo "setup: .venv has Python $have; recreating it with Python $want ($PYTHON)"
        rm -rf .venv
    fi
fi
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $PYTHON (Python $(py_minor "$PYTHON"))"
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.jaxplay-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "setup: installing jaxplay and its development tools into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[dev]'
    touch "$stamp"
fi

# The jail's unprivileged uid (docs/sandbox.md, "Who runs the jail"). When jaxplay runs
# as root it launches bubblewrap as this user, never as root. Its primary group is what
# the ACLs below name.
JAIL_USER=${JAXPLAY_JAIL_USER:-jaxplay-sandbox}
if [ "$(id -u)" = 0 ]; then
    if ! getent group "$JAIL_USER" >/dev/null; then
        groupadd --system "$JAIL_USER"
    fi
    if ! getent passwd "$JAIL_USER" >/dev/null; then
        echo "setup: creating the jail user $JAIL_USER"
        useradd --system --gid "$JAIL_USER" --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin "$JAIL_USER"
    fi
    # bubblewrap, running as that user, must resolve the Python runtime, the venv and
    # the sandbox package to bind them read-only into the jail. Where a directory on the
    # way is private (pyenv under /root is mode 700), grant the group search (x) only:
    # no listing, no reading, nothing for anyone else. Only bubblewrap itself resolves
    # host paths as this user; code in the jail sees nothing but what is bound.
    jail_uid=$(id -u "$JAIL_USER")
    jail_gid=$(getent group "$JAIL_USER" | cut -d: -f3)
    as_jail() { setpriv --reuid="$jail_uid" --regid="$jail_gid" --clear-groups -- "$@"; }
    base=$(.venv/bin/python -c 'import os, sys; print(os.path.realpath(sys.base_prefix))')
    for target in "$base" "$(pwd)/.venv" "$(pwd)/sandbox"; do
        dir=/
        IFS=/ read -ra parts <<<"${target#/}"
        for part in "${parts[@]}"; do
            dir=${dir%/}/$part
            if ! as_jail test -x "$dir"; then
                echo "setup: granting group $JAIL_USER search (x) on $dir"
                setfacl -m "g:$JAIL_USER:x" "$dir"
            fi
        done
        if ! as_jail test -r "$target"; then
            echo "setup: $target is not readable by $JAIL_USER; the jail cannot start" >&2
            exit 1
        fi
    done
fi

# The JAX versions this deployment offers besides the default (JAXPLAY_JAX_VERSIONS, a
# JSON list such as '["0.10.2", "0.4.38"]'): each gets an environment of its own with
# an interpreter it has wheels for (`jaxplay versions` lists them; docs/server.md).
if [ -n "${JAXPLAY_JAX_VERSIONS:-}" ]; then
    .venv/bin/jaxplay versions add --configured
fi
