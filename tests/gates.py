"""The suite's "require" gates: what a test needs that a developer's machine may lack.

On a developer's machine a test whose requirement is missing is skipped, with the
reason. Where the requirement is demanded (CI: ``.ci/run``), a missing one is a
failure of the whole session, before any test runs: never a skip, an xfail or a quiet
fallback to something weaker.

- the jail (bubblewrap, as ``JAXPLAY_BWRAP`` names it): demanded by
  ``JAXPLAY_JAIL_TESTS=require`` or ``CI=true``; checked at session start
  (``tests/conftest.py``).
- the browser tests (Chromium, Playwright, the built page): demanded by
  ``JAXPLAY_BROWSER_TESTS=require`` or ``CI=true``; checked when tests/browser is collected
  (``tests/browser/conftest.py``).
- the services (redis-server, PostgreSQL, their Python clients): demanded by
  ``JAXPLAY_SCALE_TESTS=require`` or ``CI=true``; checked when a test asks for one
  (``tests/support/fixtures.py``).

``tests/test_gates.py`` runs pytest with each requirement missing and checks that it
fails with the gate's message.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Mapping
from typing import NoReturn

import pytest

from sandbox.jail.settings import JailConfig

JAIL_GATE = "JAXPLAY_JAIL_TESTS"


def jail_required(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the jail's tests must run (JAXPLAY_JAIL_TESTS=require, or CI=true)."""
    env = os.environ if environ is None else environ
    return env.get(JAIL_GATE, "") == "require" or env.get("CI", "").lower() == "true"


@functools.cache
def jail_missing() -> str | None:
    """Why the jail cannot be made here (None: bubblewrap is there)."""
    bwrap = JailConfig.from_env().bwrap
    if shutil.which(bwrap) is None:
        return f"bubblewrap ({bwrap!r}) is not installed (apt-get install bubblewrap; make setup)"
    return None


def check_jail_gate() -> None:
    """Fail the session (a usage error: no test runs) when the jail is demanded and missing."""
    why = jail_missing()
    if why is not None and jail_required():
        raise pytest.UsageError(f"{JAIL_GATE}=require (or CI=true), but {why}")


#: A test that needs the jail: skipped without it on a developer's machine; where the
#: jail is demanded, the session has already failed at its start (check_jail_gate).
needs_jail = pytest.mark.skipif(jail_missing() is not None, reason=str(jail_missing()))


def skip_without_jail() -> None:
    """needs_jail, inside a fixture."""
    if (why := jail_missing()) is not None:
        check_jail_gate()  # demanded: a failure, never a skip
        pytest.skip(why)


SERVICES_GATE = "JAXPLAY_SCALE_TESTS"


def services_required(environ: Mapping[str, str] | None = None) -> bool:
    """Whether Redis and PostgreSQL must be there (JAXPLAY_SCALE_TESTS=require, or CI=true)."""
    env = os.environ if environ is None else environ
    return env.get(SERVICES_GATE, "") == "require" or env.get("CI", "").lower() == "true"


def skip_without_services(why: str | None) -> None:
    """In a service's fixture: ``why`` it is missing (None: it is there) skips the test on
    a developer's machine and fails it where the services are demanded."""
    if why is None:
        return
    if services_required():
        pytest.fail(f"{SERVICES_GATE}=require (or CI=true), but {why}", pytrace=False)
    pytest.skip(why)


BROWSER_GATE = "JAXPLAY_BROWSER_TESTS"


def browser_required(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the browser tests must run (JAXPLAY_BROWSER_TESTS=require, or CI=true)."""
    env = os.environ if environ is None else environ
    return env.get(BROWSER_GATE, "") == "require" or env.get("CI", "").lower() == "true"


def ci_demands() -> bool:
    """CI=true: every optional requirement (another JAX version, an extra) is demanded."""
    return os.environ.get("CI", "").lower() == "true"


def missing_requirement(why: str, install: str) -> NoReturn:
    """In a test: what it needs is missing. Skipped on a developer's machine with the
    command that installs it (a fresh clone's ``make test`` passes); a failure under
    CI=true, which installs everything."""
    if ci_demands():
        pytest.fail(f"CI=true, but {why}", pytrace=False)
    pytest.skip(f"{why}: {install}")
