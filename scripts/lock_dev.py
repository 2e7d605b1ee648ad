"""Pin jaxplay's own environment (.venv) besides JAX: scripts/dev_lock.txt.

    .venv/bin/python scripts/lock_dev.py           # write it from this .venv
    .venv/bin/python scripts/lock_dev.py --check   # this .venv has what it pins

``make setup`` installs pyproject.toml's requirements constrained by it (pip's ``-c``),
beside the default JAX's own lock (sandbox/environments/versions.py,
``setup_constraints``), so that a fresh setup gets the server, the tools and the
test stack the suite last passed with, not whatever the registry published since
(a new ruff adds rules; a new JAX asked for a libtpu the registry did not have).
It pins names and versions, not hashes: the interpreter may be 3.12 or 3.13.

What the default JAX's lock and its library locks pin is left out (they pin it
themselves, by hash), and so are jaxplay and pip. Run it after changing pyproject.toml's
requirements and seeing the suite pass; commit the file.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox.environments import libraries  # noqa: E402
from sandbox.environments.versions import LOCKS, setup_default  # noqa: E402

LOCK = ROOT / "scripts" / "dev_lock.txt"
HEADER = (
    "# jaxplay's own environment besides JAX and the JAX libraries (which their own locks pin),\n"
    "# as the suite last passed with it: make setup holds .venv here (pip -c).\n"
    "# Made by `.venv/bin/python scripts/lock_dev.py` (its docstring says when).\n"
)


def pinned_elsewhere() -> set[str]:
    """Canonical names the default JAX's locks pin (every interpreter's, every machine's)."""
    version = setup_default(f"{sys.version_info.major}.{sys.version_info.minor}").version
    return {
        name for path in LOCKS.glob(f"*jax-{version}-py*.txt") for name in libraries.lock_pins(path)
    }


def installed() -> dict[str, str]:
    """Canonical name -> version of every distribution of this environment."""
    return {
        libraries.canonical(d.metadata["Name"]): d.version
        for d in importlib.metadata.distributions()
        if d.metadata["Name"]
    }


def wanted() -> dict[str, str]:
    # pip: setup upgrades it first, and a constraint does not hold the installer
    skip = pinned_elsewhere() | {"jaxplay", "pip", "setuptools", "wheel"}
    return {name: v for name, v in sorted(installed().items()) if name not in skip}


def read(path: Path = LOCK) -> dict[str, str]:
    return libraries.lock_pins(path)


def differences(pins: dict[str, str], have: dict[str, str]) -> list[str]:
    """What this environment has otherwise than ``pins`` says (a pin not installed is
    fine: another interpreter's or platform's package)."""
    return [
        f"{name}: pinned {version}, installed {have[name]}"
        for name, version in sorted(pins.items())
        if name in have and have[name] != version
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args()
    if args.check:
        found = differences(read(), installed())
        for line in found:
            print(line)
        return 1 if found else 0
    pins = wanted()
    LOCK.write_text(HEADER + "".join(f"{name}=={v}\n" for name, v in pins.items()))
    print(f"wrote {len(pins)} pins to {LOCK.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
