"""The numerics output: the float64 shadow's rows and outputs, on the warm engine,
each figure checked against the same computation done in plain JAX in a fresh
process with ``jax_enable_x64`` (tests/engine/numerics_reference.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sandbox.protocol.events import EVENT_ADAPTER
from tests.engine.numerics_reference import reference

CANCEL = """import jax.numpy as jnp

def f(x):
    c = jnp.cos(x)
    top = 1 - c
    return top / x**2
"""
CANCEL_ARGS = "jnp.array([1e-3, 1e-2, 1.0], jnp.float32)"

#: the same computation, for the reference process: the float32 program op by op
#: (eager), and the float64 one; the sub's born error recomputed from its definition
CANCEL_REFERENCE = """
x32 = jnp.array([1e-3, 1e-2, 1.0], jnp.float32)
x64 = x32.astype(jnp.float64)
c32 = jnp.cos(x32); top32 = 1 - c32; out32 = top32 / x32**2
c64 = jnp.cos(x64); top64 = 1 - c64; out64 = top64 / x64**2
tiny = float(jnp.finfo(jnp.float32).tiny)
def rel(lo, hi):
    return np.abs(np.asarray(lo, np.float64) - np.asarray(hi)) / np.maximum(np.abs(np.asarray(hi)), tiny)
# the sub on the shadow's input rounded to float32, against the shadow's sub
born_sub = rel(1 - c64.astype(jnp.float32), top64)
# the div on the shadow's inputs rounded: it adds only its own rounding
born_div = rel(top64.astype(jnp.float32) / (x64**2).astype(jnp.float32), out64)
result = {
    "eager": float(rel(out32, out64).max()),
    "eager_median": float(np.median(rel(out32, out64))),
    "sub_error": float(rel(top32, top64).max()),
    "born_sub": float(born_sub.max()),
    "born_div": float(born_div.max()),
    "cos_error": float(rel(c32, c64).max()),
}
"""


def numerics(events: list[dict], pipeline: str = "main") -> dict:
    found = [e for e in events if e["type"] == "numerics" and e["pipeline"] == pipeline]
    assert len(found) == 1, [e for e in events if e["type"] in ("error", "done")]
    assert events[-1]["status"] == "ok", events[-1]
    EVENT_ADAPTER.validate_python(found[0])
    return found[0]


def close(shown: float | str, want: float) -> bool:
    """A figure of the event (4 significant digits) is the reference's."""
    return math.isclose(float(shown), want, rel_tol=1e-3, abs_tol=1e-12)


def test_a_cancellation_is_born_at_its_sub_and_carried_by_the_div(run) -> None:
    event = numerics(run({"code": CANCEL, "args": CANCEL_ARGS, "outputs": ["numerics"]}))
    want = reference(CANCEL_REFERENCE)
    rows = {r["primitive"]: r for r in event["rows"]}
    assert [r["primitive"] for r in event["rows"]] == ["cos", "sub", "integer_pow", "div"]
    assert [rows[p]["line"] for p in ("cos", "sub", "div")] == [4, 5, 6]
    assert close(rows["cos"]["error"]["max"], want["cos_error"])
    assert close(rows["sub"]["error"]["max"], want["sub_error"])
    assert close(rows["sub"]["born"]["max"], want["born_sub"])
    assert close(rows["div"]["born"]["max"], want["born_div"])
    # the sub's error is its own; the div's is the sub's, carried on
    assert want["born_sub"] > 1e-2 > 1e-6 > want["born_div"]
    assert event["worst_born"] == event["rows"].index(rows["sub"])
    assert rows["sub"]["hint"]["kind"] == "cancellation"
    assert rows["div"]["hint"] is None and rows["cos"]["hint"] is None
    (out,) = event["outputs"]
    assert close(out["eager"]["max"], want["eager"])
    assert close(out["eager"]["median"], want["eager_median"])
    # the editor's band: the most ulps born per line
    band = {b["line"]: b for b in event["lines"]}
    assert float(band[5]["born_ulp"]) > 1e4 > 1 > float(band[6]["born_ulp"])
    assert band[5]["hint"] == "cancellation"


NESTED = """import jax
import jax.numpy as jnp

@jax.custom_jvp
def softplus(x):
    return jnp.log(1 + jnp.exp(x))

softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] * jax.nn.sigmoid(p[0])))

def f(x):
    def body(c, y):
        return c + softplus(y), c
    total, _ = jax.lax.scan(body, 0.0, x)
    return jax.lax.cond(total > 0, lambda t: t * 2, lambda t: -t, total)
"""


def test_rows_reach_into_jit_custom_jvp_scan_and_the_branch_taken(run) -> None:
    event = numerics(
        run(
            {
                "code": NESTED,
                "args": "jnp.array([-30.0, 0.5, 2.0])",
                "transforms": [{"name": "jit"}],
                "outputs": ["numerics"],
            }
        )
    )
    by_line: dict[int | None, list[dict]] = {}
    for r in event["rows"]:
        by_line.setdefault(r["line"], []).append(r)
    # softplus's log and exp, inside custom_jvp inside the scan's body inside jit
    log = next(r for r in by_line[6] if r["primitive"] == "log")
    assert log["iterations"] == 3 and log["depth"] == 3
    # log(1 + exp(-30)): 1 + 9e-14 is 1 in float32; the log's own error (ulps of ~0
    # are tiny) is what the log1p hint names
    assert log["hint"]["kind"] == "log1p"
    # the branch taken (total > 0): t * 2 on line 14, never -t
    assert [r["primitive"] for r in by_line[14] if r["depth"] == 2] == ["mul"]
    (out,) = event["outputs"]
    assert out["run"] is not None and out["eager"] is not None


def test_a_program_over_the_size_is_refused_before_anything_runs(run) -> None:
    event = numerics(
        run(
            {
                "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x) * 2\n",
                "args": "jnp.ones((50, 50))",
                "outputs": ["numerics"],
                "numerics_max_values": 1000,
            }
        )
    )
    assert event["rows"] == [] and event["outputs"] == []
    assert "5,000 values" in event["refused"] and "1,000" in event["refused"]
    assert "numerics_max_values" in event["refused"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_ulps_are_of_the_programs_dtype(run, dtype: str) -> None:
    code = "import jax.numpy as jnp\n\ndef f(x):\n    return x / 3\n"
    event = numerics(
        run(
            {
                "code": code,
                "args": f"jnp.array([1.0, 2.0, 5.0], jnp.{dtype})",
                "outputs": ["numerics"],
            }
        )
    )
    want = reference(
        f"""
x = jnp.array([1.0, 2.0, 5.0], jnp.{dtype})
lo = np.asarray((x / 3).astype(jnp.float64)); hi = np.asarray(x.astype(jnp.float64)) / 3
info = jnp.finfo(jnp.{dtype})
spacing = np.exp2(np.maximum(np.floor(np.log2(np.abs(hi))), info.minexp) - info.nmant)
result = {{"ulp": float((np.abs(lo - hi) / spacing).max())}}
"""
    )
    (row,) = event["rows"]
    assert row["dtype"] == dtype
    assert close(row["error"]["max_ulp"], want["ulp"])
    # one operation adds its rounding, no more (XLA's CPU division is not always the
    # nearest: 2/3 in float32 comes out 2/3 of an ulp off)
    assert 0 < float(row["born"]["max_ulp"]) <= 1


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MENU = {e["id"]: e for e in json.loads((EXAMPLES / "menu.json").read_text())["examples"]}


def example(run, name: str) -> dict:
    entry = MENU[name]
    assert entry["outputs"] == ["numerics"]
    code = (EXAMPLES / entry["file"]).read_text()
    steps = [{"name": s["name"], **s.get("options", {})} for s in entry["steps"]]
    event = numerics(
        run({"code": code, "args": entry["args"], "transforms": steps, "outputs": ["numerics"]})
    )
    return {"event": event, "code": code.splitlines()}


def test_the_three_examples_show_what_their_headers_say(run) -> None:
    got = example(run, "numerics-cancellation")
    worst = got["event"]["rows"][got["event"]["worst_born"]]
    assert worst["primitive"] == "sub" and "1 - c" in got["code"][worst["line"] - 1]
    assert worst["hint"]["kind"] == "cancellation"

    got = example(run, "numerics-bf16-softmax")
    worst = got["event"]["rows"][got["event"]["worst_born"]]
    assert (worst["primitive"], worst["dtype"], worst["hint"]["kind"]) == (
        "exp",
        "bfloat16",
        "subtract_max",
    )
    assert got["event"]["outputs"][0]["run"]["max"] == "inf"  # NaN where float64 has a softmax

    got = example(run, "numerics-jit-vs-eager")
    jit = got["event"]["jit"]
    assert jit["differs"] and jit["primitive"] == "add"
    assert "ax + bx" in got["code"][jit["line"] - 1]
