#!/usr/bin/env bash
# Sets up everything jaxplay needs on a fresh Debian-like machine: system packages
# (when run as root with apt), a virtual environment in .venv with jaxplay and its
# development tools. Safe to run again: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# chromium + fonts: the browser tests (Playwright drives Debian's chromium).
# bubblewrap + libseccomp2: the jail; acl: setfacl, to let the jail's uid reach the
# Python runtime when it lives under a private directory (see below and docs/sandbox.md).
# binutils: objdump, which the engine's asm output runs (inside the jail, from /usr).
# gcc + libc6-dev: the install builds a small C extension (sandbox/zygote/_identity.c).
APT_PACKAGES=(bubblewrap libseccomp2 acl chromium fonts-dejavu-core redis-server postgresql binutils gcc libc6-dev)

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

# The interpreter of .venv (Python >= 3.12 for today's JAX): scripts/venv_python.sh.
# shellcheck source=scripts/venv_python.sh
source scripts/venv_python.sh
stamp=.venv/.jaxplay-installed
# The default JAX is the newest release jaxplay offers for this interpreter, held with
# the rest of its committed lock (sandbox/environments/versions.py, setup_default): a
# JAX published after jaxplay's own release was never tested (nor its library lock
# made), and its extras may not be on the registry yet. Again when .venv has another.
# The rest (server, tools, test stack) is held by scripts/dev_lock.txt (scripts/lock_dev.py).
constraints=.venv/.jaxplay-constraints.txt
.venv/bin/python -c 'import sys; from sandbox.environments.versions import setup_constraints as c
print("\n".join(c("%d.%d" % sys.version_info[:2])))' >"$constraints"
default_jax=$(sed -n 's/^jax==//p' "$constraints")
have_jax=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("jax"))' 2>/dev/null || echo none)
# The install also builds the C extension sandbox/zygote/_identity.abi3.so in place
# (pyproject.toml, ext-modules): again when its source changed.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ sandbox/zygote/_identity.c -nt "$stamp" ] ||
    [ scripts/dev_lock.txt -nt "$stamp" ] || [ "$have_jax" != "$default_jax" ]; then
    echo "setup: installing jaxplay (JAX $default_jax) and its development tools into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[dev]' -c "$constraints" -c scripts/dev_lock.txt
    touch "$stamp"
    # optional for the install (pip -q hides its failure): say it here
    if [ ! -f sandbox/zygote/_identity.abi3.so ]; then
        echo "setup: sandbox/zygote/_identity.c was not built (no C compiler or Python headers?):" \
            "a kept process's check runs in Python, ~5-10 ms a run more" >&2
    fi
fi

# The JAX libraries runs may import (Flax, Optax, Equinox...: sandbox/environments/libraries.py,
# docs/sandbox.md "Libraries"), exactly as the default version's committed library
# lock pins them, every wheel by its sha256; again when the lock changed. The jail runs
# .venv's interpreter; the server never imports them.
liblock=$(.venv/bin/python -c 'import sys, importlib.metadata as m; from sandbox.environments import libraries; print(libraries.lock_path(m.version("jax"), "%d.%d" % sys.version_info[:2]))')
if [ -f "$liblock" ] && ! cmp -s "$liblock" .venv/.jaxplay-libraries; then
    echo "setup: installing the JAX libraries of $liblock into .venv"
    .venv/bin/python -m pip install -q --require-hashes --no-deps --only-binary=:all: -r "$liblock"
    cp "$liblock" .venv/.jaxplay-libraries
fi
# Other versions of some of them a request may pick ("libraries": {"optax": "0.2.6"}),
# as the default version's committed alternatives lock pins them, each alone in an
# overlay directory under .jaxplay/libs (sandbox/environments/library_choices.py); only those missing.
.venv/bin/python -m sandbox.environments.library_choices

# The page's locked toolchain (frontend/package-lock.json, npm ci): what builds the page
# (scripts/build_frontend.sh, which would install it too) and axe-core, which the
# accessibility test injects into the page (tests/browser/test_navigation.py).
if command -v npm >/dev/null 2>&1; then
    if [ ! -d frontend/node_modules ] || [ frontend/package-lock.json -nt frontend/node_modules/.package-lock.json ]; then
        echo "setup: installing the page's locked toolchain (npm ci in frontend/)"
        (cd frontend && npm ci --no-audit --no-fund --loglevel=error)
    fi
else
    echo "setup: npm is missing (e.g. apt-get install nodejs npm): the page is served as" \
        "committed, but its accessibility test skips and it cannot be rebuilt" >&2
fi

# JAX's TPU extra (libtpu), only when asked for: deviceless TPU compiles (docs/api.md,
# "Deviceless TPU compiles"). It is Google's binary under Google Cloud's terms, not an
# open-source licence; it goes into .venv/libtpu-extra, off sys.path (sandbox/environments/tpu_extra.py).
if [ "${JAXPLAY_TPU_EXTRA:-0}" = 1 ]; then
    .venv/bin/python -m sandbox.environments.tpu_extra
fi

# JAX's CUDA plugin (jax-cuda12-plugin and -pjrt, Apache-2.0, ~490 MB, without NVIDIA's
# CUDA libraries), only when asked for: deviceless GPU compiles (docs/api.md,
# "Deviceless GPU compiles"). It goes into .venv/cuda-extra, off sys.path
# (sandbox/environments/cuda_extra.py), so CPU runs never load it.
if [ "${JAXPLAY_CUDA_EXTRA:-0}" = 1 ]; then
    .venv/bin/python -m sandbox.environments.cuda_extra
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
    # One user per jail slot, $JAIL_USER-0 ... -(N-1), all in the group $JAIL_USER (which
    # the ACLs below name): each jail runs as its own host uid, so per-uid kernel
    # counters (processes, inotify instances, pending signals) are never shared between
    # tenants. N is JAXPLAY_JAIL_SLOTS (the most jails at once; default 128).
    slots=${JAXPLAY_JAIL_SLOTS:-128}
    created=0
    for ((i = 0; i < slots; i++)); do
        if ! getent passwd "$JAIL_USER-$i" >/dev/null; then
            useradd --system --gid "$JAIL_USER" --no-create-home --home-dir /nonexistent \
                --shell /usr/sbin/nologin "$JAIL_USER-$i"
            created=$((created + 1))
        fi
    done
    if [ "$created" -gt 0 ]; then
        echo "setup: created $created jail slot users $JAIL_USER-0..$((slots - 1))"
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
