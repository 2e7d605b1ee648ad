#!/usr/bin/env bash
# Chooses the interpreter of .venv and (re)creates .venv with it; sourced by
# scripts/setup.sh, run alone by tests/deploy/test_setup_python.py (in the directory whose
# .venv it manages).
#
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
