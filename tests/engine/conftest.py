"""The engine's tests: ``run`` here is the session's warm engine (one process that
imports JAX once and forks a child per run, behind the real supervisor:
tests/support/warm_engine.py) instead of a fresh worker process per run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.warm_engine import WarmEngine


@pytest.fixture(scope="session")
def warm_engine() -> Iterator[WarmEngine]:
    engine = WarmEngine().start()
    yield engine
    engine.stop()


@pytest.fixture
def run(warm_engine: WarmEngine) -> Callable[[Any], list[dict[str, Any]]]:
    return warm_engine.run
