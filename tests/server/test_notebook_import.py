"""``POST /api/v1/snippets/import`` as a user meets it: a notebook shaped like JAX's own
docs notebooks (the quickstart: markdown, ``!pip install``, ``%matplotlib inline``, a
``%%time`` cell), made with nbformat, posted to a live server on the real pool; its link
resolves and its code runs to the notebook's own answer. Files that are not notebooks
get a clear 422, and the snippet's size limits hold."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.support.live_server import LiveServer

pytestmark = pytest.mark.slow

IPYNB = {"content-type": "application/x-ipynb+json"}


def quickstart() -> str:
    """A notebook as JAX's docs write them (docs/notebooks/quickstart.ipynb's shape)."""
    nb = new_notebook(
        cells=[
            new_markdown_cell("# Quickstart\n\nJAX is NumPy on the CPU, GPU, and TPU."),
            new_code_cell("!pip install --upgrade jax"),
            new_code_cell(
                "%matplotlib inline\nimport jax\nimport jax.numpy as jnp\n"
                "from jax import grad, jit, vmap"
            ),
            new_code_cell(
                "def selu(x, alpha=1.67, lmbda=1.05):\n"
                "  return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)\n\n"
                "x = jnp.arange(5.0)\nprint(selu(x))"
            ),
            new_code_cell("%%time\nselu_jit = jit(selu)\n_ = selu_jit(x).block_until_ready()"),
            new_code_cell("jnp.dot?"),
            new_code_cell("%%bash\necho not python\nls -l"),
            new_markdown_cell("## Taking derivatives with `grad`"),
            new_code_cell(
                "def sum_logistic(x):\n  return jnp.sum(1.0 / (1.0 + jnp.exp(-x)))\n\n"
                "x_small = jnp.arange(3.)\n  !echo indented shell\n"
                "derivative_fn = grad(sum_logistic)\nprint(derivative_fn(x_small))"
            ),
        ],
        metadata={
            "kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}
        },
    )
    nbformat.validate(nb)
    text: str = nbformat.writes(nb)
    return text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("nb") / "jaxplay.sqlite3"
    env = {"JAXPLAY_PROBE_ON_START": "false", "JAXPLAY_SNIPPET_RATE_PER_MINUTE": "0"}
    live = LiveServer(db, "--pool", "subprocess", "--unsafe-no-jail", env=env).start()
    yield live
    live.stop()


def post(server: LiveServer, body: str | bytes, **headers: str) -> httpx.Response:
    return httpx.post(server.url + "/api/v1/snippets/import", content=body,
                      headers={**IPYNB, **headers}, timeout=60)  # fmt: skip


def test_a_docs_notebook_becomes_a_link_that_runs(server: LiveServer) -> None:
    r = post(server, quickstart())
    assert r.status_code == 201, r.text
    answer = r.json()
    assert answer["entry"] == "sum_logistic" and answer["code_cells"] == 7
    dropped = [(d["cell"], d["text"].strip(), d["why"]) for d in answer["dropped"]]
    assert dropped == [
        (1, "!pip install --upgrade jax", "shell command"),
        (2, "%matplotlib inline", "line magic"),
        (4, "%%time", "cell magic"),
        (5, "jnp.dot?", "help (?)"),
        (6, "%%bash", "the cell is %%bash, not Python"),
        (6, "echo not python", "the cell is %%bash, not Python"),
        (6, "ls -l", "the cell is %%bash, not Python"),
        (8, "!echo indented shell", "shell command"),
    ]
    code = answer["request"]["code"]
    assert "selu_jit = jit(selu)" in code and "%" not in code and "!" not in code
    assert code.index("def selu") < code.index("def sum_logistic")  # cells in order
    # The link is a snippet like any other: GET resolves it to the same request.
    assert answer["url"] == f"{server.url}/s/{answer['id']}"
    stored = httpx.get(f"{server.url}/api/v1/snippets/{answer['id']}").json()
    assert stored == answer["request"]
    # Importing it again is the same snippet (content-addressed).
    assert post(server, quickstart()).json()["id"] == answer["id"]
    # And it runs: the notebook's own grad of sum_logistic at [0, 1, 2].
    run = {**stored, "args": "(jnp.arange(3.),)", "transforms": [{"name": "grad"}],
           "outputs": ["value"]}  # fmt: skip
    events = httpx.post(server.url + "/api/v1/runs", json=run, timeout=120).json()["events"]
    value = next(e for e in events if e["type"] == "value")
    assert value["repr"].startswith("Array([0.25      , 0.196611")  # float32's last digit
    assert value["repr"].endswith(", 0.10499357], dtype=float32)")  # varies with jit
    stdout = "".join(e["text"] for e in events if e["type"] == "stdout")
    assert "[0.25       0.19661" in stdout  # the notebook's own print ran too


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"\xff\xfe not text", "not UTF-8"),
        (b"def f():\n    return 1\n", "not JSON"),
        (json.dumps({"code": "def f(): pass"}).encode(), "not a notebook"),
        (
            json.dumps(
                {
                    "nbformat": 4,
                    "nbformat_minor": 5,
                    "metadata": {},
                    "cells": [{"cell_type": "code"}],
                }
            ).encode(),
            "not a valid notebook",
        ),
    ],
)
def test_what_is_not_a_notebook_gets_a_clear_422(
    server: LiveServer, body: bytes, says: str
) -> None:
    r = post(server, body)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "not_a_notebook" and says in r.json()["message"]


def _notebook(*sources: str, language: str = "python") -> str:
    nb = new_notebook(
        cells=[new_code_cell(s) for s in sources],
        metadata={"kernelspec": {"name": "k", "language": language, "display_name": "k"}},
    )
    text: str = nbformat.writes(nb)
    return text


def test_notebooks_that_cannot_be_a_snippet(server: LiveServer) -> None:
    cases: list[tuple[str, str]] = [
        (_notebook("x <- c(1, 2)", language="R"), "a R notebook"),
        (_notebook("import jax\nprint(1)"), "no top-level function"),
        (_notebook("def f(:\n  pass"), "do not parse as Python: line 1"),
    ]
    for body, says in cases:
        r = post(server, body)
        assert r.status_code == 422 and says in r.json()["message"], r.text


def test_the_snippet_size_limits_hold(server: LiveServer) -> None:
    # Code over 64 KiB in a body under the body limit: 413 on `code`, nothing stored.
    big = _notebook("def f():\n    return 1\n", "# " + "x" * 70_000)
    r = post(server, big)
    assert r.status_code == 413 and r.json()["field"] == "code", r.text
    # A body over JAXPLAY_MAX_BODY_BYTES (512 KiB): refused before it is read.
    huge = _notebook("def f():\n    return 1\n", "# " + "x" * 600_000)
    r = post(server, huge)
    assert r.status_code == 413 and r.json()["error"] == "too_large"
