#!/usr/bin/env bash
# Sets up everything jaxplay needs on a fresh Debian-like machine: system packages
# (when run as root with apt), a virtual environment in .venv with jaxplay and its
# development tools. Safe to run again: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(bubblewrap libseccomp2)

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

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.jaxplay-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "setup: installing jaxplay and its development tools into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[dev]'
    touch "$stamp"
fi
