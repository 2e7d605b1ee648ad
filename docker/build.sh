#!/usr/bin/env bash
# Builds every image of docker/Dockerfile from Debian's packages and PyPI alone: no
# image registry is needed (none is reachable where jaxplay is built).
#
#   docker/build.sh                  # all targets (see TARGETS below)
#   docker/build.sh server worker-cpu
#
# 1. The base: one Debian 13 (trixie) root file system made by mmdebstrap from Debian's
#    packages, imported as jaxplay-base:<hash of its recipe>. Every target starts from
#    it, so the images share it on disk. Debian 13's python3 is 3.13: the newest JAX
#    needs 3.12 or later (Debian 12's 3.11 stops at JAX 0.10).
# 2. The wheels: every Python package the images install, downloaded by pip into
#    build/deploy/wheels/{base,cuda,tpu} at the versions .venv has (its `pip freeze`
#    constrains them), so an image runs what the tests ran. The image builds then
#    reach no network.
# 3. Each target, FROM that base, installing from those wheels only.
#
# Needs a running Docker engine, mmdebstrap (apt-get install docker.io mmdebstrap) and
# .venv (make setup). Rebuilding is cheap: the base and the wheels are kept under
# build/deploy and made again only when their recipe changes.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build/deploy
SUITE=trixie
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# What the base holds for every target: Python (server, workers), the jail's
# bubblewrap and libseccomp (workers), binutils (objdump: the asm output), and the services the stack runs beside them.
BASE_PACKAGES=(python3 python3-venv bubblewrap libseccomp2 binutils redis-server nginx postgresql)
# What the stage that compiles the workers' C extension holds (docker/Dockerfile).
BUILDER_PACKAGES=(python3 python3-dev python3-venv gcc libc6-dev)
# Python of the base (Debian 13's python3); the wheels are fetched for it.
PYTHON_VERSION=3.13
# worker-cuda and worker-tpu download JAX's CUDA 12 wheels (some GB) and libtpu.
TARGETS=(server worker-cpu worker-cuda worker-tpu redis postgres lb)
[ $# -gt 0 ] && TARGETS=("$@")
# Debian's client: its BuildKit is built in (a newer client wants the buildx plugin)
DOCKER=${DOCKER:-$(command -v /usr/bin/docker docker | head -n 1)}

say() { echo "build: $*" >&2; }
die() { say "$*"; exit 1; }
seconds() { echo $(($(date +%s) - $1)); }

command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: apt-get install mmdebstrap"
$DOCKER info >/dev/null 2>&1 || die "no Docker engine answers (scripts/deploy_check.sh starts one)"
[ -x .venv/bin/python ] || die ".venv is missing: make setup"
mkdir -p "$OUT"

# --- 1. the base ----------------------------------------------------------------------
# Documentation, manuals and translations are left out, and so is LLVM: PostgreSQL's
# JIT is its only user, and it is turned off (docker/postgres.sh).
MMDEBSTRAP_OPTIONS=(mmdebstrap --variant=minbase --mode=root --format=tar --quiet
    --aptopt='APT::Install-Recommends "false"'
    --dpkgopt='path-exclude=/usr/share/doc/*'
    --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --dpkgopt='path-exclude=/usr/share/man/*'
    --dpkgopt='path-exclude=/usr/share/locale/*'
    --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/libLLVM*'
    --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/libz3*'
    --dpkgopt='path-exclude=/usr/lib/postgresql/*/lib/bitcode/*'
    --dpkgopt='path-exclude=/usr/lib/postgresql/*/lib/llvmjit*')
SOURCES=("deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main"
    "deb $SECURITY_MIRROR $SUITE-security main")
# debian_image NAME VAR PACKAGE...: an image of Debian $SUITE with those packages,
# jaxplay-NAME:<hash of its recipe>, made now unless it is there; its tag into VAR.
debian_image() {
    local name=$1 var=$2 t0 tarball tag
    shift 2
    local recipe=("${MMDEBSTRAP_OPTIONS[@]}" --include="$(IFS=,; echo "$*")" "$SUITE")
    tag=jaxplay-$name:$(echo "${recipe[*]}" | sha256sum | cut -c1-12)
    if $DOCKER image inspect "$tag" >/dev/null 2>&1; then
        say "$name $tag is there"
    else
        t0=$(date +%s)
        tarball="$OUT/$name-${tag#*:}.tar"
        if [ ! -f "$tarball" ]; then
            say "making the Debian $SUITE root file system of $name (mmdebstrap) ..."
            "${recipe[@]}" "$tarball.part" "${SOURCES[@]}"
            mv "$tarball.part" "$tarball"
        fi
        $DOCKER import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'CMD ["/bin/bash"]' "$tarball" "$tag" >/dev/null
        say "$name $tag made in $(seconds "$t0") s"
    fi
    printf -v "$var" %s "$tag"
}
debian_image base BASE_TAG "${BASE_PACKAGES[@]}"
# The workers' C extension (sandbox/zygote/_identity.c) is compiled in a stage of its
# own, FROM this: no image that runs keeps a compiler.
debian_image builder BUILDER_TAG "${BUILDER_PACKAGES[@]}"

# --- 2. the wheels --------------------------------------------------------------------
# Three sets, each in its own directory with its requirement lists and .venv's pins,
# so that a build binds only the set it installs (the CUDA set alone is GBs):
#   base: the server's packages and the engine's (JAX); cuda: jax[cuda12]; tpu: jax[tpu]
t0=$(date +%s)
WHEELS=$OUT/wheels
.venv/bin/python - "$WHEELS" "$PYTHON_VERSION" <<'EOF'
import subprocess, sys, tomllib
from pathlib import Path

from sandbox.environments import libraries, library_choices

out, python_version = Path(sys.argv[1]), sys.argv[2]
pyproject = tomllib.loads(Path("pyproject.toml").read_text())
project = pyproject["project"]
jax = subprocess.run(
    [".venv/bin/python", "-c", "import importlib.metadata as m; print(m.version('jax'))"],
    check=True, capture_output=True, text=True,
).stdout.strip()
frozen = subprocess.run(
    [".venv/bin/python", "-m", "pip", "freeze", "--exclude-editable"],
    check=True, capture_output=True, text=True,
).stdout
lists = {
    "base": {
        "server.txt": [*pyproject["build-system"]["requires"], *project["dependencies"]],
        "engine.txt": project["optional-dependencies"]["engine"],
        # the curated libraries JAX's version offers (its committed lock), at .venv's
        # pins, where make setup installed the same set for the jails
        "libraries.txt": [
            f"{name}=={version}" for name, version in libraries.offered(jax, python_version).items()
        ],
    },
    "cuda": {"cuda.txt": [f"jax[cuda12]=={jax}"]},
    "tpu": {"tpu.txt": [f"jax[tpu]=={jax}"]},
}
for wheel_set, files in lists.items():
    (out / wheel_set).mkdir(parents=True, exist_ok=True)
    (out / wheel_set / "constraints.txt").write_text(frozen)
    for name, requirements in files.items():
        (out / wheel_set / name).write_text("".join(f"{r}\n" for r in requirements))
# the other versions of a library the operator offers beside the set's (its committed,
# hash-pinned alternatives lock: sandbox/environments/library_choices.py), each downloaded alone and
# installed by the worker image as an overlay, as make setup does into .jaxplay/libs
alternatives = library_choices.lock_path(jax, python_version)
(out / "base" / "alternatives.lock").write_text(
    "".join(f"{a.line}\n" for a in library_choices.read_lock(alternatives))
    if alternatives.is_file()
    else ""
)
EOF
sets=(base)
for target in "${TARGETS[@]}"; do
    case $target in
        worker-cuda) sets+=(cuda) ;;
        worker-tpu) sets+=(tpu) ;;
    esac
done
for wheel_set in "${sets[@]}"; do
    dir=$WHEELS/$wheel_set
    # downloaded from PyPI (or copied from pip's cache where it holds them); nothing is asked
    # again while the requirements and the pins stay the same
    stamp=$({ cat "$dir"/*.txt; cat "$dir"/*.lock 2>/dev/null || true; } | sha256sum | cut -c1-16)-$PYTHON_VERSION
    [ "$(cat "$dir/.complete" 2>/dev/null)" = "$stamp" ] && continue
    requirements=()
    for list in "$dir"/*.txt; do
        [ "$(basename "$list")" = constraints.txt ] || requirements+=(-r "$list")
    done
    .venv/bin/python -m pip download --quiet --disable-pip-version-check \
        --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
        --dest "$dir" -c "$dir/constraints.txt" "${requirements[@]}" \
        2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    # the alternatives: each wheel alone, by its hash, outside the set's pins (it is
    # another version of a pinned package)
    if [ -s "$dir/alternatives.lock" ]; then
        .venv/bin/python -m pip download --quiet --disable-pip-version-check \
            --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
            --no-deps --require-hashes --dest "$dir" -r "$dir/alternatives.lock"
    fi
    echo "$stamp" >"$dir/.complete"
done
say "wheels (${sets[*]}) in $WHEELS ($(du -sh "$WHEELS" | cut -f1)) in $(seconds "$t0") s"

# --- 3. the images --------------------------------------------------------------------
for target in "${TARGETS[@]}"; do
    t0=$(date +%s)
    # --network none: everything comes from the base and the wheels
    DOCKER_BUILDKIT=1 $DOCKER build --quiet --network none --file docker/Dockerfile \
        --target "$target" \
        --build-arg "BASE=$BASE_TAG" --build-arg "BUILDER=$BUILDER_TAG" \
        --tag "jaxplay-$target" . >/dev/null
    say "jaxplay-$target built in $(seconds "$t0") s"
done
