"""schemathesis against /openapi.json: no server errors, no answer outside the schema.

The app runs with the fake pool (every generated run is "executed" in microseconds)
and a temporary database; examples are kept modest for CI time.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from backend.app import create_app

from .conftest import make_settings
from .fakes import FakePool

pytestmark = pytest.mark.slow

# removed when the interpreter exits (collection alone builds the app, in every process)
_database_dir = tempfile.TemporaryDirectory(prefix="jaxplay-schema-")
_app = create_app(
    make_settings(Path(_database_dir.name), max_queue=2),
    pool=FakePool(max_concurrent=2),
    pool_name="fake",
)
schema = schemathesis.openapi.from_asgi("/openapi.json", _app)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
]


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_keeps_to_its_schema(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=CHECKS)
