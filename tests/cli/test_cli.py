"""``jaxplay run`` as a user calls it (SPEC §4): the console script, in a subprocess.

Also runs every example in ``examples/`` with the command its header suggests, and
checks the outcome the header promises (``-> ok`` or ``-> error: Kind at line N``).

A local ``jaxplay run`` starts its own jail and imports JAX (seconds per command): one
test runs the console script so, end to end (``jaxplay``); the others, the examples among
them, send the same command to one real ``jaxplay serve`` with ``--server`` (``served``),
whose warm pool runs them as it runs anyone's: the same request, the same rendering.
One of them runs the console script in a process of its own; the rest run the same
typer app in this process (``in_process``: the console script is ``backend.cli.main:main``,
which calls it), since a new Python's imports alone took about 2 s a command on a
loaded machine, the time the examples' runs take.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import in_process
from tests.support.live_server import LiveServer

ROOT = Path(__file__).resolve().parents[2]
#: a real run through the CLI (a pool, a jail when bubblewrap is there): tens of seconds
#: on a loaded machine, so out of make test-fast
real_run = pytest.mark.slow
EXAMPLES = ROOT / "examples"
SCRIPT = Path(sys.executable).parent / "jaxplay"

SIMPLE = "import jax.numpy as jnp\n\n\ndef f(x):\n    y = jnp.sin(x)\n    return jnp.sum(y * y)\n"


def jaxplay(
    *argv: str, stdin: str | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "backend.cli.main"]
    env = dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("JAX_PLATFORMS", None)
    return subprocess.run(
        [*command, *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )


def events_of(proc: subprocess.CompletedProcess) -> list[dict[str, Any]]:
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, f"no output; exit {proc.returncode}; stderr:\n{proc.stderr[-3000:]}"
    events = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(isinstance(e, dict) and "type" in e for e in events)
    return events


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Any]]:
    """``jaxplay`` with ``--server`` to a real server on the real pool (a jail), in this
    process (``in_process``); ``process=True``: the console script in a process of its own;
    ``token=False``: without the token (the address's single-use runs)."""
    tmp = tmp_path_factory.mktemp("cli-served")
    settings = {
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0",
        "JAXPLAY_QUEUE_TIMEOUT_S": "120",
        "JAXPLAY_API_TOKENS": f'["{CLI_TOKEN}"]',
    }
    server = LiveServer(tmp / "jaxplay.sqlite3", env=settings, log=tmp / "serve.log")
    server.start()
    try:

        def run(
            *argv: str, process: bool = False, token: bool = True, **kw: Any
        ) -> subprocess.CompletedProcess:
            assert argv[0] == "run"
            # With the token the runs are one returning client's, as a user's script with
            # JAXPLAY_TOKEN set is: its kept process is reused (each run still checked).
            # Without one each run is the address's and single-use, a new jail apiece
            # (test_make_example and test_a_token_names_... keep that path).
            auth = ("--token", CLI_TOKEN) if token and "--token" not in argv else ()
            runner = jaxplay if process else in_process
            return runner(*argv, *auth, "--server", server.url, **kw)

        yield run
    finally:
        server.stop()


@pytest.fixture
def snippet(tmp_path: Path) -> Path:
    path = tmp_path / "snippet_file.py"
    path.write_text(SIMPLE)
    return path


# --- running a file -------------------------------------------------------------


@real_run
def test_json_lines_parse_and_end_with_done(snippet: Path) -> None:
    proc = jaxplay(
        "run", str(snippet), "--args", "jnp.arange(3.0)", "--transform", "grad",
        "--transform", "jit", "--output", "jaxpr", "--output", "value", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = events_of(proc)
    assert events[0]["type"] == "accepted"
    assert events[-1] == {**events[-1], "type": "done", "status": "ok"}
    assert [e["type"] for e in events].count("done") == 1
    (jaxpr,) = [e for e in events if e["type"] == "jaxpr"]
    assert jaxpr["pipeline"] == "main"
    assert "jit[" in jaxpr["text"] and "sin" in jaxpr["text"] and "cos" in jaxpr["text"]
    (value,) = [e for e in events if e["type"] == "value"]
    assert [leaf["shape"] for leaf in value["tree"]] == [[3]]
    # d/dx sum(sin(x)^2) = 2 sin(x) cos(x) = sin(2x)
    import math

    assert value["tree"][0]["data"] == pytest.approx([math.sin(2 * x) for x in (0.0, 1.0, 2.0)])


@real_run
def test_human_readable_output_contains_the_jaxpr(
    served: Callable[..., Any], snippet: Path
) -> None:
    argv = ["run", str(snippet), "--args", "(jnp.ones((3,)),)", "--transform", "grad"]
    as_json = served(*argv, "--transform", "jit", "--output", "jaxpr", "--json")
    (jaxpr,) = [e["text"] for e in events_of(as_json) if e["type"] == "jaxpr"]
    human = served(*argv, "--transform", "jit", process=True)  # the console script
    assert human.returncode == 0, human.stderr[-3000:]
    assert jaxpr in human.stdout  # the text, exactly as JAX prints it
    assert "{ lambda ; a:f32[3]. let" in human.stdout
    for line in human.stdout.splitlines():
        assert not line.startswith('{"type"'), "human output must not be JSON events"
    # the other outputs are there too, readably
    assert "module @jit_f" in human.stdout  # StableHLO
    assert "HloModule jit_f" in human.stdout  # HLO
    assert "done" in human.stdout.splitlines()[-1]


CLI_TOKEN = "cli-token-4f9a1c2e7b"


@real_run
def test_a_token_names_the_tenant_of_a_run_through_a_server(
    served: Callable[..., Any], snippet: Path
) -> None:
    """Issue 33: without a token a run is the address's, single-use; ``--token`` (or
    JAXPLAY_TOKEN) sends one, so the server runs it as that token's tenant."""
    argv = ["run", str(snippet), "--args", "jnp.ones(3)", "--output", "jaxpr", "--json"]
    ok = served(*argv, "--token", CLI_TOKEN)
    assert ok.returncode == 0 and events_of(ok)[-1]["status"] == "ok", ok.stderr[-3000:]
    refused = served(*argv, "--token", "not-one-the-server-issued")
    assert refused.returncode != 0
    assert "401" in refused.stderr and "not one the server issued" in refused.stderr


@real_run
def test_output_jaxpr_only_emits_the_jaxpr(served: Callable[..., Any], snippet: Path) -> None:
    proc = served(
        "run", str(snippet), "--args", "jnp.ones(3)", "--transform", "jit",
        "--output", "jaxpr", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    kinds = [e["type"] for e in events_of(proc)]
    assert kinds.count("jaxpr") == 1
    produced = set(kinds) - {"accepted", "stage", "stdout", "stderr", "done"}
    assert produced == {"jaxpr"}, kinds
    stages = [e["stage"] for e in events_of(proc) if e["type"] == "stage"]
    assert not {"lower", "compile", "execute"} & set(stages), stages


@real_run
def test_cost_before_optimisation_only_with_its_flag(
    served: Callable[..., Any], snippet: Path
) -> None:
    def cost(*flags: str) -> dict[str, Any]:
        proc = served(
            "run", str(snippet), "--args", "jnp.ones(3)", "--transform", "jit",
            "--output", "cost", "--json", *flags,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        (event,) = [e for e in events_of(proc) if e["type"] == "cost"]
        return event

    assert cost()["before"] is None
    assert cost("--cost-before")["before"]["flops"] is not None


@real_run
def test_entry_and_json_transform_options(served: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text("def loss(w, x):\n    return (x @ w) ** 2\n")
    proc = served(
        "run", str(path), "--entry", "loss", "--args", "(jnp.ones(3), jnp.ones((4, 3)))",
        "--transform", "grad", "--transform", '{"name": "vmap", "in_axes": [null, 0]}',
        "--output", "value", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (value,) = [e for e in events_of(proc) if e["type"] == "value"]
    assert value["tree"][0]["shape"] == [4, 3]
    assert value["tree"][0]["data"] == [6.0] * 12


# --- a whole request ------------------------------------------------------------


def _request(**extra: Any) -> dict[str, Any]:
    return {
        "code": SIMPLE,
        "args": "jnp.arange(4.0)",
        "transforms": [{"name": "grad"}],
        "compare": [[{"name": "grad"}, {"name": "jit"}]],
        "outputs": ["jaxpr", "value"],
        "backend": "cpu",
        **extra,
    }


@real_run
def test_request_from_stdin(served: Callable[..., Any]) -> None:
    proc = served("run", "--request", "-", "--json", stdin=json.dumps(_request()))
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = events_of(proc)
    jaxprs = {e["pipeline"]: e for e in events if e["type"] == "jaxpr"}
    values = {e["pipeline"]: e for e in events if e["type"] == "value"}
    assert set(jaxprs) == set(values) == {"main", "0"}
    assert values["main"]["tree"][0]["sha256"] == values["0"]["tree"][0]["sha256"]
    assert "jit[" not in jaxprs["main"]["text"] and "jit[" in jaxprs["0"]["text"]


@real_run
def test_request_from_a_file(served: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(_request(compare=[])))
    proc = served("run", "--request", str(path), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [e["type"] for e in events_of(proc)].count("value") == 1


# --- errors ---------------------------------------------------------------------


@real_run
def test_syntax_error_in_the_file(served: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("import jax.numpy as jnp\n\n\ndef f(x)\n    return jnp.sin(x)\n")
    human = served("run", str(path), "--args", "jnp.ones(3)")
    assert human.returncode not in (0, 2), human.returncode  # the run failed, the request was fine
    assert "SyntaxError" in human.stdout
    assert "line 4" in human.stdout
    as_json = served("run", str(path), "--args", "jnp.ones(3)", "--json")
    assert as_json.returncode == human.returncode
    events = events_of(as_json)
    (error,) = [e for e in events if e["type"] == "error"]
    assert (error["kind"], error["line"], error["stage"]) == ("SyntaxError", 4, "exec")
    assert error["hint"]
    assert events[-1]["type"] == "done" and events[-1]["status"] == "error"


@real_run
def test_a_jax_error_names_the_sharp_bit(served: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "branchy.py"
    path.write_text("def f(x):\n    if x.sum() > 0:\n        return x\n    return -x\n")
    proc = served("run", str(path), "--args", "jnp.ones(3)", "--transform", "jit")
    assert proc.returncode == 1
    assert "TracerBoolConversionError" in proc.stdout
    assert "line 2" in proc.stdout
    assert "hint" in proc.stdout


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"transforms": [{"name": "grud"}]}, ["transforms"]),
        ({"transforms": [{"name": "grad", "argnum": 0}]}, ["transforms", "argnum"]),
        ({"config": {"jax_no_such_flag": True}}, ["config", "jax_no_such_flag"]),
        ({"outputs": ["jaxpr", "pictures"]}, ["outputs"]),
        ({"devices": 0}, ["devices"]),
        ({"entry": "not an identifier"}, ["entry"]),
        ({"colour": "blue"}, ["colour"]),
    ],
    ids=[
        "unknown-transform",
        "unknown-option",
        "bad-config",
        "bad-output",
        "devices",
        "entry",
        "extra-field",
    ],
)
@pytest.mark.parametrize("where", ["local", "server"])
def test_bad_request_is_refused_with_exit_code_2(
    change: dict[str, Any], names: list[str], where: str, request: pytest.FixtureRequest
) -> None:
    """Checked here before any jail starts, or (``--server``) by the server, which the CLI
    sends the request to unchecked: the same exit code and names either way."""
    argv = ("run", "--request", "-", "--json")
    stdin = json.dumps(_request(**change))
    if where == "local":
        proc = in_process(*argv, stdin=stdin)
    else:
        proc = request.getfixturevalue("served")(*argv, stdin=stdin)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert proc.stdout.strip() == "", "a refused request runs nothing"
    message = proc.stderr.strip()
    assert message and "Traceback" not in message
    for name in names:
        assert name in message, (name, message)


def test_request_that_is_not_json() -> None:
    proc = in_process("run", "--request", "-", stdin="{not json")
    assert proc.returncode == 2
    assert proc.stderr.strip() and "Traceback" not in proc.stderr


def test_short_form_unknown_transform(snippet: Path) -> None:
    proc = in_process("run", str(snippet), "--transform", "grud")
    assert proc.returncode == 2
    assert "transforms" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_file() -> None:
    proc = in_process("run", "no/such/file.py")
    assert proc.returncode == 2
    assert "no/such/file.py" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("url", "code", "said"),
    [
        ("http://127.0.0.1:9", 1, "cannot reach http://127.0.0.1:9"),  # nothing listens
        ("ftp://127.0.0.1:9", 2, "not a server URL"),
        ("127.0.0.1:9", 2, "not a server URL"),
        ("http://127.0.0.1:port", 2, "its port is not a number"),
    ],
)
@pytest.mark.parametrize("session", ["--session", "--no-session"])
def test_a_server_that_cannot_be_reached_is_said(
    snippet: Path, url: str, code: int, said: str, session: str
) -> None:
    proc = in_process("run", str(snippet), "--args", "1.0", session, "--server", url)
    assert proc.returncode == code, (proc.stdout[-1000:], proc.stderr[-1000:])
    assert said in proc.stderr and "Traceback" not in proc.stderr


# --- the examples -----------------------------------------------------------------

_COMMAND = re.compile(r"^#\s+(jaxplay run .*)$")
_OUTCOME = re.compile(r"^#\s+-> (ok|error: (\w+) at line (\d+))\s*$")


def example_commands() -> list[Any]:
    """Each ``# jaxplay run ...`` line of an example header, with the outcome on the
    ``#   -> ...`` line below it."""
    params = []
    for path in sorted(EXAMPLES.glob("*.py")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            command = _COMMAND.match(line)
            if not command:
                continue
            outcome = _OUTCOME.match(lines[i + 1]) if i + 1 < len(lines) else None
            assert outcome, f"{path.name}:{i + 2}: no '#   -> ok|error: Kind at line N' line"
            expected = (
                ("ok", None, None)
                if outcome.group(1) == "ok"
                else ("error", outcome.group(2), int(outcome.group(3)))
            )
            params.append(pytest.param(command.group(1), expected, id=f"{path.stem}:{i + 1}"))
    return params


def test_every_example_suggests_a_command() -> None:
    examples = sorted(EXAMPLES.glob("*.py"))
    assert len(examples) >= 8
    for path in examples:
        text = path.read_text()
        assert text.startswith("#"), f"{path.name}: starts with its header comment"
        assert any(_COMMAND.match(line) for line in text.splitlines()), (
            f"{path.name}: no suggested command"
        )
        compile(text, str(path), "exec")


@real_run
def test_make_example(served: Callable[..., Any]) -> None:
    """The Makefile's ``make example`` command, as written there (to the server: the
    local path is test_json_lines_parse_and_end_with_done's)."""
    proc = served(
        "run", "examples/grad_of_loss.py", "--args", "(jnp.ones((3,)),)",
        "--transform", "grad", "--transform", "jit", token=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the outer jaxpr takes w (f32[3]); JAX may print the traced f as a let above it
    assert re.search(r"\{ lambda ; \w+:f32\[3\]\. let", proc.stdout), proc.stdout[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize(("command", "expected"), example_commands())
def test_example_runs_as_its_header_says(
    served: Callable[..., Any], command: str, expected: tuple[Any, ...]
) -> None:
    argv = shlex.split(command)
    assert argv[:2] == ["jaxplay", "run"]
    proc = served(*argv[1:], "--json")
    events = events_of(proc)
    done = events[-1]
    errors = [e for e in events if e["type"] == "error"]
    status, kind, line = expected
    assert done["type"] == "done" and done["status"] == status, (
        done,
        [(e["kind"], e["line"], e["message"][:300]) for e in errors],
    )
    if status == "error":
        assert [(e["kind"], e["line"]) for e in errors] == [(kind, line)]
        assert proc.returncode == 1
    else:
        assert proc.returncode == 0 and not errors
