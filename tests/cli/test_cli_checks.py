"""``jaxplay run --check ...`` (in process: the pool replaced by a stand-in that
records the request and answers with a checks event)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from backend.cli import main as cli
from backend.cli import run as run_cli
from sandbox.protocol import EVENT_ADAPTER, RunRequest

CHECKS_EVENT = {
    "type": "checks",
    "pipeline": "main",
    "results": [
        {"name": "nans", "status": "failed", "message": "invalid value (nan) encountered in log",
         "line": 7, "hint": "the line marked is where it happened"},
        {"name": "grad", "status": "failed", "order": 2, "mode": "rev", "line": 12,
         "message": "Not equal to tolerance rtol=0.002, atol=0.002\nVJP of VJP cotangent projection",
         "max_abs_error": 5.2966733, "max_rel_error": 1.0513088},
    ],
}  # fmt: skip


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[RunRequest]:
    requests: list[RunRequest] = []

    async def local_events(request: RunRequest) -> AsyncGenerator[dict[str, Any], None]:
        requests.append(request)
        yield CHECKS_EVENT
        yield {"type": "done", "status": "ok", "ms": 1.0, "reason": ""}

    monkeypatch.setattr(run_cli, "_local_events", local_events)
    return requests


def test_check_flags_make_the_request_and_the_results_are_shown(
    asked: list[RunRequest], tmp_path: Path
) -> None:
    EVENT_ADAPTER.validate_python(CHECKS_EVENT)  # the stand-in's event is a real one
    code = tmp_path / "f.py"
    code.write_text("def f(x):\n    return x\n")
    argv = ["run", str(code), "--output", "jaxpr", "--check", "nans", "--check", "grad",
            "--grad-order", "2", "--grad-mode", "rev"]  # fmt: skip
    result = CliRunner().invoke(cli.app, argv)
    assert result.exit_code == 0, result.output
    (request,) = asked
    assert request.checks == ["nans", "grad"]
    assert request.grad_orders == [2] and request.grad_modes == ["rev"]
    assert request.outputs == ["jaxpr", "checks"]
    assert "FAILED  nans at line 7: invalid value (nan) encountered in log" in result.output
    assert "grad (order 2, rev) at line 12" in result.output
    assert "max absolute error 5.297, max relative error 1.051" in result.output


def test_an_unknown_check_is_a_bad_request(asked: list[RunRequest], tmp_path: Path) -> None:
    code = tmp_path / "f.py"
    code.write_text("def f(x):\n    return x\n")
    result = CliRunner().invoke(cli.app, ["run", str(code), "--check", "nan"])
    assert result.exit_code == run_cli.EXIT_BAD_REQUEST and asked == []
    assert "checks.0" in result.output
