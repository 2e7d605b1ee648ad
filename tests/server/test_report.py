"""The bug report as a maintainer uses it: ``report.md`` and ``report.ipynb`` of a
snippet from a live server on the real pool; the Markdown's repro, pasted into a file
and run in a fresh virtual environment that holds only the same JAX (no jaxplay:
tests/support/plain_jax.py), exits 0 and prints the value the run showed; with
``?across=`` it says the first version an output changed in, checked against each
version's own run (on the installed versions: CI's); the notebook validates with
nbformat and nbclient runs it to the same output; the environment is the worker's own
``jax.print_environment_info()``; the HLO is the run's."""

from __future__ import annotations

import itertools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import nbformat
import pytest
from nbclient import NotebookClient

from sandbox.environments.versions import version_key
from tests.gates import missing_requirement
from tests.support import plain_jax
from tests.support.live_server import LiveServer

pytestmark = pytest.mark.slow

GRAD_VMAP = {
    "code": "def f(x, w):\n    return jnp.sum(jnp.tanh(x @ w) ** 2)\n",
    "args": "(jnp.arange(6.0).reshape(2, 3) / 10, jnp.ones((3, 2)))",
    "transforms": [{"name": "grad", "argnums": 1}, {"name": "jit"}],
    "outputs": ["jaxpr"],
    "config": {"jax_enable_x64": True},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("report") / "jaxplay.sqlite3"
    env = {"JAXPLAY_PROBE_ON_START": "false", "JAXPLAY_REPORT_HLO_CHARS": "1000"}
    live = LiveServer(db, "--pool", "subprocess", "--unsafe-no-jail", env=env).start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def plain_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv's python: the same JAX as the server's default, and nothing of jaxplay."""
    python = plain_jax.make(tmp_path_factory.mktemp("plain-jax"))
    no_jaxplay = subprocess.run([python, "-I", "-c", "import sandbox"], capture_output=True,
                                text=True, timeout=60)  # fmt: skip
    assert no_jaxplay.returncode == 1 and "No module named 'sandbox'" in no_jaxplay.stderr
    return python


def snippet(server: LiveServer, body: dict[str, Any]) -> str:
    r = httpx.post(server.url + "/api/v1/snippets", json=body, timeout=60)
    assert r.status_code == 201, r.text
    sid: str = r.json()["id"]
    return sid


def shown_value(server: LiveServer, body: dict[str, Any]) -> str:
    """What the page shows for the run: its value's repr."""
    run = {**body, "outputs": ["value"]}
    events = httpx.post(server.url + "/api/v1/runs", json=run, timeout=120).json()["events"]
    value: str = next(e for e in events if e["type"] == "value")["repr"]
    return value


def python_blocks(markdown: str) -> list[str]:
    """The bodies of the report's ```python fences."""
    return [m[1] for m in re.findall(r"^(`{3,})python\n(.*?)\n\1$", markdown, re.S | re.M)]


def test_the_markdown_repro_runs_in_a_fresh_venv(
    server: LiveServer, plain_python: Path, tmp_path: Path
) -> None:
    sid = snippet(server, GRAD_VMAP)
    r = httpx.get(f"{server.url}/api/v1/snippets/{sid}/report.md", timeout=180)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/markdown")
    report = r.text
    for section in ("### Description", "### Config and flags", "### System info", "### HLO"):
        assert section in report
    assert f"{server.url}/s/{sid}" in report and "jit(grad(f, argnums=1))" in report
    (script,) = python_blocks(report)
    assert "jaxplay" not in script.split("\n", 1)[1] and "sandbox" not in script
    path = tmp_path / "repro.py"
    path.write_text(script)
    # Plain JAX in a fresh venv, isolated (-I: no cwd, no PYTHONPATH), run where jaxplay is not.
    done = subprocess.run([plain_python, "-I", str(path)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = shown_value(server, GRAD_VMAP)
    assert "dtype=float64" in expected  # the config (x64) reached the repro
    assert done.stdout.strip() == expected
    # The report says what the run showed, in its own fence, and the same JAX.
    assert f"\n{expected}\n" in report
    jax_version = subprocess.run([plain_python, "-I", "-c", "import jax; print(jax.__version__)"],
                                 capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert f"JAX {jax_version}" in report
    # The environment is the worker's print_environment_info(): its own first lines.
    assert f"jax:    {jax_version}" in report and "numpy:" in report and "python:" in report
    # The HLO inline is cut at JAXPLAY_REPORT_HLO_CHARS, the whole one is the attachment.
    hlo = httpx.get(f"{server.url}/api/v1/snippets/{sid}/report.hlo.txt", timeout=120)
    assert hlo.status_code == 200 and hlo.text.startswith("HloModule")
    assert len(hlo.text) > 1000 and f"the first 1000 of {len(hlo.text)} characters" in report
    assert hlo.text[:1000] in report


def test_the_notebook_validates_and_runs_to_the_same_output(server: LiveServer) -> None:
    sid = snippet(server, GRAD_VMAP)
    r = httpx.get(f"{server.url}/api/v1/snippets/{sid}/report.ipynb", timeout=180)
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-ipynb+json"
    nb = nbformat.reads(r.text, as_version=4)
    nbformat.validate(nb)
    (code,) = [c for c in nb.cells if c.cell_type == "code"]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    printed = "".join(o.get("text", "") for o in code.outputs if o.output_type == "stream")
    assert printed.strip() == shown_value(server, GRAD_VMAP)


def test_an_error_is_reported_as_the_run_showed_it(
    server: LiveServer, plain_python: Path, tmp_path: Path
) -> None:
    body = {
        "code": "def f(x):\n    return jnp.dot(x, jnp.ones((4,)))\n",
        "args": "(jnp.ones((3,)),)",
    }
    sid = snippet(server, body)
    report = httpx.get(f"{server.url}/api/v1/snippets/{sid}/report.md", timeout=180).text
    assert "`f` raises TypeError" in report and "No HLO: the run did not compile." in report
    (script,) = python_blocks(report)
    (tmp_path / "repro.py").write_text(script)
    done = subprocess.run([plain_python, "-I", str(tmp_path / "repro.py")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("TypeError: dot_general requires")


def test_a_mesh_run_says_why_no_script(server: LiveServer) -> None:
    body = {"code": "def f(x):\n    return x * 2\n", "args": "(jnp.ones((4,)),)", "devices": 2,
            "mesh": {"shape": [2], "axis_names": ["x"]}, "in_shardings": [["x"]]}  # fmt: skip
    sid = snippet(server, body)
    report = httpx.get(f"{server.url}/api/v1/snippets/{sid}/report.md", timeout=180).text
    assert "The repro is not written out: the run used a device mesh, input shardings" in report
    assert python_blocks(report) == []


#: Its jaxpr (a literal) and its value carry the minor version of the JAX it ran on, so
#: both certainly change between any two installed versions: where each first changed
#: is known without guessing what a JAX release changed.
VERSIONED = {
    "code": "def f(x):\n    minor = int(jax.__version__.split('.')[1])\n"
    "    return jnp.sin(x) + minor\n",
    "args": "(jnp.arange(3.0),)",
    "outputs": ["jaxpr", "value"],
}


def across_versions(server: LiveServer) -> list[str]:
    """The oldest installed version, the default, and the newest between them if any
    (CI installs three besides the default); at least two, or the test cannot run."""
    backends = httpx.get(server.url + "/api/v1/backends", timeout=60).json()["backends"]
    rows = next(b["versions"] for b in backends if b.get("versions"))
    installed = sorted((r["version"] for r in rows if r["installed"]), key=version_key)
    if len(installed) < 2:
        missing_requirement(
            f"the report's first-changed-in needs a JAX version besides the default "
            f"installed, found {installed}",
            ".venv/bin/jaxplay versions add 0.10.2",
        )
    (default,) = [r["version"] for r in rows if r["default"]]
    others = [v for v in installed if v != default]
    return sorted({others[0], others[-1], default}, key=version_key)


@pytest.mark.timeout(900)  # each version's pool starts cold, then the across run
def test_the_report_says_the_first_version_an_output_changed_in(server: LiveServer) -> None:
    versions = across_versions(server)
    sid = snippet(server, VERSIONED)
    # What each version's own run shows (POST /api/v1/runs, not the across route):
    # the first version, oldest first, whose text differs from the one before.
    texts: dict[str, dict[str, str]] = {}
    for version in versions:
        run = {**VERSIONED, "jax_version": version}
        r = httpx.post(server.url + "/api/v1/runs", json=run, timeout=300)
        assert r.status_code == 200, r.text
        events = r.json()["events"]
        assert events[-1]["status"] == "ok", events[-3:]
        jaxpr = next(e["text"] for e in events if e["type"] == "jaxpr")
        value = next(e["repr"] for e in events if e["type"] == "value")
        texts[version] = {"jaxpr": jaxpr, "value": value}
    # Named newest first: the report (its across run) orders them itself.
    query = ",".join(reversed(versions))
    r = httpx.get(f"{server.url}/api/v1/snippets/{sid}/report.md?across={query}", timeout=900)
    assert r.status_code == 200, r.text
    section = r.text.split("### First changed in\n", 1)[1].split("\n### ", 1)[0]
    assert f"Across JAX {', '.join(reversed(versions))} (jaxplay's across-versions run)" in section
    for output in ("jaxpr", "value"):
        first = next(new for old, new in itertools.pairwise(versions)
                     if texts[old][output] != texts[new][output])  # fmt: skip
        assert first == versions[1]  # the minor version is in it: it changes at once
        assert f"- {output} (main): first changed in **JAX {first}**" in section


def test_unknown_snippets_and_across_refusals(server: LiveServer) -> None:
    r = httpx.get(f"{server.url}/api/v1/snippets/aaaaaaaa/report.md")
    assert r.status_code == 404
    sid = snippet(server, {"code": "def f():\n    return 1\n"})
    # across on versions this server cannot run: the across route's own 422
    r = httpx.get(f"{server.url}/api/v1/snippets/{sid}/report.md?across=0.4.1,0.4.2", timeout=120)
    assert r.status_code == 422 and r.json()["field"] == "versions.0", r.text
