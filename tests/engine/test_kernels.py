"""Pallas on the CPU worker and the ``kernels`` output (issue 24, parts 1-3).

Two runs on the warm engine (a 2 x 2-grid tiled matmul with ``kernels``; the race
example in ``tpu_races`` mode), each held to JAX called directly in this process:
the interpret-mode value, the Mosaic-TPU and Triton texts JAX prints for the same
kernel, the grid map against the index maps evaluated by hand.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import warnings
from pathlib import Path
from typing import Any

import pytest

from sandbox.protocol import RunRequest
from sandbox.protocol.requests import SNIPPET_FILENAME

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: row and column blocks: what Mosaic-TPU accepts (a multiple of 8 by one of 128)
ROWS, COLS = 16, 128
MATMUL = f"""import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def matmul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] @ y_ref[...]


def call(x, y, **extra):
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((2 * {ROWS}, 2 * {COLS}), x.dtype),
        grid=(2, 2),
        in_specs=[
            pl.BlockSpec(({ROWS}, 256), lambda i, j: (i, 0)),
            pl.BlockSpec((256, {COLS}), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec(({ROWS}, {COLS}), lambda i, j: (i, j)),
        **extra,
    )(x, y)


def f(x, y):
    return call(x, y)


def patched():
    return hasattr(pl.pallas_call, "__wrapped__")
"""
ARGS = (
    "(jnp.arange(8192.0).reshape(32, 256) / 4096, jnp.arange(65536.0).reshape(256, 256).T / 8192)"
)


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


@pytest.fixture(scope="module")
def matmul_run(warm_engine: Any) -> list[dict[str, Any]]:
    request = {
        "code": MATMUL,
        "args": ARGS,
        "backend": "cpu",
        "outputs": ["value", "remarks", "kernels"],
        "timeout_s": 120,
    }
    return warm_engine.run(request)


def _module() -> dict[str, Any]:
    """MATMUL run here, under the engine's file name (the kernel's debug info and the
    Triton locations name it)."""
    namespace: dict[str, Any] = {}
    exec(compile(MATMUL, SNIPPET_FILENAME, "exec"), namespace)
    return namespace


def _printed_module(header: str, lower: Any) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        lower()
    text = printed.getvalue()
    assert header in text, text[-2000:]
    after = text.split(header, 1)[1].split("\n", 1)[1]
    return after.split("\n\nThe ", 1)[0].strip("\n")


@pytest.mark.slow
def test_interpret_mode_value_equals_jax_interpret(matmul_run: list[dict[str, Any]]) -> None:
    import jax.numpy as jnp
    import numpy as np

    done = matmul_run[-1]
    assert done["status"] == "ok", matmul_run
    ns = _module()
    x, y = eval(ARGS, {"jnp": jnp})
    expected = np.ascontiguousarray(np.asarray(ns["call"](x, y, interpret=True)))
    [value] = _of(matmul_run, "value")
    assert value["tree"][0]["shape"] == [32, 256]
    assert value["tree"][0]["sha256"] == hashlib.sha256(expected.tobytes()).hexdigest()
    [remarks] = _of(matmul_run, "remarks")
    [said] = [r for r in remarks["items"] if r["kind"] == "pallas"]
    assert "interpret mode" in said["message"]
    assert MATMUL.splitlines()[said["line"] - 1].strip() == "return pl.pallas_call("


def test_grid_map_is_the_index_maps_at_every_grid_point(matmul_run: list[dict[str, Any]]) -> None:
    [event] = _of(matmul_run, "kernels")
    [kernel] = event["kernels"]
    assert kernel["grid"] == [2, 2] and kernel["points"] == 4
    points = list(itertools.product(range(2), range(2)))
    by_hand = {  # each index map, called by hand, times its block size
        "args[0]": [(i * ROWS, 0) for i, _ in points],
        "args[1]": [(0, j * COLS) for _, j in points],
        "outputs": [(i * ROWS, j * COLS) for i, j in points],
    }
    got = {op["origin"]: [tuple(s) for s in op["starts"]] for op in kernel["operands"]}
    assert got == by_hand
    kinds = {op["origin"]: (op["kind"], op["block_shape"]) for op in kernel["operands"]}
    assert kinds == {
        "args[0]": ("in", [ROWS, 256]),
        "args[1]": ("in", [256, COLS]),
        "outputs": ("out", [ROWS, COLS]),
    }


def test_mosaic_and_triton_are_what_jax_prints(matmul_run: list[dict[str, Any]]) -> None:
    import jax
    import jax.numpy as jnp
    from jax.sharding import AbstractDevice, AbstractMesh

    [event] = _of(matmul_run, "kernels")
    [kernel] = event["kernels"]
    ns = _module()
    shapes = [jax.ShapeDtypeStruct(s, jnp.float32) for s in ((32, 256), (256, 256))]
    debug = jax.jit(lambda x, y: ns["call"](x, y, debug=True))

    def on(kind: str, cores: int, platform: str) -> Any:
        device = AbstractDevice(device_kind=kind, num_cores=cores, platform=platform)
        return jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=device))

    def tpu() -> None:
        with on(kernel["mosaic_target"], 1, "tpu"):
            debug.trace(*shapes).lower(lowering_platforms=("tpu",))

    def cuda() -> None:
        # the Pallas Triton backend's deprecation notice aside
        with on(kernel["triton_target"], 132, "cuda"), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            debug.trace(*shapes).lower(lowering_platforms=("cuda",))

    assert kernel["triton_target"] == "NVIDIA H100 80GB HBM3"
    mosaic = _printed_module("The Mosaic module for pallas_call", tpu)
    assert kernel["mosaic"].strip("\n") == mosaic and "tpu.matmul" in mosaic
    triton = _printed_module("The Triton module for pallas_call", cuda)
    assert kernel["triton"].strip("\n") == triton and "tt.dot" in triton
    # each Triton line with a location is at the kernel's one line (o_ref[...] = ...)
    body = MATMUL.splitlines().index("    o_ref[...] = x_ref[...] @ y_ref[...]") + 1
    assert kernel["triton_sources"] and {s["line"] for s in kernel["triton_sources"]} == {body}
    dot = next(n for n, t in enumerate(kernel["triton"].splitlines(), 1) if "tt.dot" in t)
    assert (dot, body) in [(s["out_line"], s["line"]) for s in kernel["triton_sources"]]
    assert {s["line"] for s in kernel["jaxpr_sources"]} == {body}
    # Mosaic's too, from the same module printed with its locations
    matmul = next(n for n, t in enumerate(kernel["mosaic"].splitlines(), 1) if "tpu.matmul" in t)
    assert (matmul, body) in [(s["out_line"], s["line"]) for s in kernel["mosaic_sources"]]
    assert {s["line"] for s in kernel["mosaic_sources"]} == {body}


@pytest.mark.slow
def test_the_race_example_reports_its_race_at_the_kernel_lines(warm_engine: Any) -> None:
    code = (EXAMPLES / "pallas_race.py").read_text()
    request = {
        "code": code,
        "args": "(jnp.ones((8, 128)),)",
        "backend": "cpu",
        "outputs": ["value", "remarks"],
        "pallas_interpret": "tpu_races",
        "timeout_s": 120,
    }
    events = warm_engine.run(request)
    assert events[-1]["status"] == "ok", events
    [remarks] = _of(events, "remarks")
    races = [r for r in remarks["items"] if r["kind"] == "race"]
    lines = code.splitlines()
    start = next(n for n, t in enumerate(lines, 1) if "copy.start()" in t)
    read = next(n for n, t in enumerate(lines, 1) if "= buf[...]" in t)
    assert [r["line"] for r in races] == [start, read], races
    assert "RACE DETECTED" in races[0]["message"]
    [value] = _of(events, "value")
    assert value["tree"][0]["summary"]["nan_count"] == 8 * 128  # the read beat the copy


def test_the_patch_is_the_runs_alone(warm_engine: Any) -> None:
    """Inside a run pallas_call is wrapped; the module attribute is JAX's own again
    after it (what a kept process's check compares, by identity)."""
    import jax.experimental.pallas as pallas

    from sandbox.engine.core.pallas import interpreting

    original = pallas.pallas_call
    request = RunRequest(code=MATMUL, args=ARGS, outputs=["value"], pallas_interpret="tpu_races")
    with interpreting(request, None):
        assert pallas.pallas_call is not original
        assert pallas.pallas_call.__wrapped__ is original  # type: ignore[attr-defined]
    assert pallas.pallas_call is original
    # and in the engine: the run's code sees the wrapper
    events = warm_engine.run(
        {"code": MATMUL, "entry": "patched", "args": "()", "outputs": ["value"], "timeout_s": 60}
    )
    [value] = _of(events, "value")
    assert value["repr"] == "True"


def test_a_lowering_for_other_hardware_is_not_patched() -> None:
    from sandbox.engine.core.pallas import patches

    assert patches(RunRequest(code=MATMUL, args=ARGS, outputs=["value"]))
    assert not patches(RunRequest(code="def f(x):\n    return x\n", args="1.0"))
    assert not patches(
        RunRequest(code=MATMUL, args=ARGS, outputs=["jaxpr"], lowering_platforms=["tpu"])
    )


#: In a process of its own (the check installs an audit hook): after a first Pallas
#: run (JAX's first-use state: dialects loaded, caches filled), a run in interpret
#: mode changes nothing the kept process's check compares.
KEPT = """
import jax.numpy as jnp
from sandbox.engine.core.pallas import interpreting
from sandbox.protocol import RunRequest
from sandbox.zygote import watch as state_watch

CODE = {code!r}


def run():
    with interpreting(RunRequest(code=CODE, args="()"), None):
        namespace = {{}}
        exec(compile(CODE, "snippet.py", "exec"), namespace)
        namespace["f"](jnp.ones((16, 256)), jnp.ones((256, 256))).block_until_ready()


def main():
    run()
    watch = state_watch.Watch()
    run()
    assert watch.changes() == [], watch.changes()
    print("kept")


main()
"""


@pytest.mark.slow
def test_a_kept_process_is_not_retired_by_the_wrapper() -> None:
    import subprocess
    import sys

    code = (EXAMPLES / "pallas_tiled_matmul.py").read_text().replace("BLOCK = 128", "BLOCK = 8")
    done = subprocess.run(
        [sys.executable, "-c", KEPT.format(code=code)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=EXAMPLES.parent,
    )
    assert done.returncode == 0 and "kept" in done.stdout, done.stderr[-3000:]


def test_a_grid_past_the_limit_is_cut_and_says_so() -> None:
    """In this process: a 40 x 40 grid's map stops at MAX_GRID_POINTS, row-major,
    each point's block where its index map (called by hand) puts it."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from sandbox.engine.outputs.kernels import _pallas_eqns, grid_map
    from sandbox.protocol.limits import MAX_GRID_POINTS

    def kernel(x_ref: Any, o_ref: Any) -> None:
        o_ref[...] = x_ref[...]

    def index_map(i: int, j: int) -> tuple[int, int]:
        return (j, i)

    def f(x: Any) -> Any:
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((320, 320), jnp.float32),
            grid=(40, 40),
            in_specs=[pl.BlockSpec((8, 8), index_map)],
            out_specs=pl.BlockSpec((8, 8), lambda i, j: (i, j)),
            interpret=True,
        )(x)

    [eqn] = _pallas_eqns(jax.make_jaxpr(f)(jnp.ones((320, 320))))
    got = grid_map(eqn.params["grid_mapping"])
    assert got["grid"] == [40, 40] and got["points"] == MAX_GRID_POINTS < 1600
    assert got["grid_notes"] == [
        f"the grid has 1,600 points: the map shows the first {MAX_GRID_POINTS:,} (row-major)"
    ]
    points = list(itertools.product(range(40), range(40)))[:MAX_GRID_POINTS]
    x, out = got["operands"]
    assert x["starts"] == [[8 * a for a in index_map(i, j)] for i, j in points]
    assert out["starts"] == [[8 * i, 8 * j] for i, j in points]
