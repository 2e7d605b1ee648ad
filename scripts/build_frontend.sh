#!/usr/bin/env bash
# Builds the page: frontend/src -> frontend/dist (committed, so `jaxplay serve` needs
# no Node at run time). Installs the locked toolchain (npm ci) when node_modules is
# missing or older than the lock file, type-checks, checks for import circles (oxlint's
# import/no-cycle, .oxlintrc.json), runs the unit tests, builds.
#
#   scripts/build_frontend.sh           build frontend/dist
#   scripts/build_frontend.sh --check   build into a temporary folder and fail if it
#                                       differs from the committed frontend/dist (CI)
set -euo pipefail
cd "$(dirname "$0")/../frontend"

if ! command -v npm >/dev/null 2>&1; then
    echo "build_frontend: needs Node.js >= 20 and npm (e.g. apt-get install nodejs npm)" >&2
    exit 1
fi
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "build_frontend: npm ci"
    npm ci --no-audit --no-fund --loglevel=error
fi
# the editor's completion index of the default JAX version (scripts/gen_completions.py,
# made by .venv's JAX): written by a build, compared with the committed one by --check
if [ -x ../.venv/bin/python ]; then
    ../.venv/bin/python ../scripts/gen_completions.py ${1:+"$1"}
else
    echo "build_frontend: no .venv: the completion index is not checked" >&2
fi
npx tsc --noEmit -p .
npm run --silent circles
npx vitest run --reporter=dot

if [ "${1:-}" = "--check" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    npx vite build --logLevel warn --outDir "$tmp/dist" --emptyOutDir
    node ../scripts/precompress_assets.mjs "$tmp/dist" >/dev/null
    if ! diff -r "$tmp/dist" dist >/dev/null; then
        echo "build_frontend: frontend/dist is not what frontend/src builds to;" \
             "run scripts/build_frontend.sh and commit frontend/dist" >&2
        diff -rq "$tmp/dist" dist >&2 || true
        exit 1
    fi
    echo "build_frontend: frontend/dist matches a fresh build"
else
    npx vite build --logLevel warn
    # <file>.br and <file>.gz beside each text file: served as they are to a client
    # that accepts them (backend/app/web/assets.py), none compressed per request
    node ../scripts/precompress_assets.mjs dist | tail -1
    echo "build_frontend: built frontend/dist ($(du -sh dist | cut -f1))"
fi
