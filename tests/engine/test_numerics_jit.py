"""The numerics output's comparisons, on the warm engine: jit against the program's
equations one by one (the first differing equation found by cut compiles, the cause
named by a recompile), and precision settings side by side; each figure checked
against plain JAX in a fresh process."""

from __future__ import annotations

import math

from tests.engine.numerics_reference import reference
from tests.engine.test_numerics import close, numerics

FMA = """import jax.numpy as jnp

def f(a, b, x):
    ax = a * x
    bx = b * x
    return ax + bx
"""
FMA_ARGS = "jnp.float32(1e20), jnp.float32(-1e20), jnp.float32(1e10)"


def test_jit_against_eager_finds_the_add_that_became_a_fused_multiply_add(run) -> None:
    event = numerics(
        run(
            {
                "code": FMA,
                "args": FMA_ARGS,
                "transforms": [{"name": "jit"}],
                "outputs": ["numerics"],
            }
        )
    )
    want = reference(
        """
a, b, x = jnp.float32(1e20), jnp.float32(-1e20), jnp.float32(1e10)
f = lambda a, b, x: a * x + b * x
with jax.disable_jit():
    eager = float(f(a, b, x))
result = {"jit": float(jax.jit(f)(a, b, x)), "eager": eager}
""",
        x64=False,
    )
    # on this JAX and CPU, jit contracts the products into the add (a fused multiply-add)
    assert want["eager"] == 0.0 and want["jit"] != 0.0
    jit = event["jit"]
    assert jit["differs"] and jit["closer"] == "eager"
    row = event["rows"][jit["first_row"]]
    assert (jit["primitive"], jit["line"], row["primitive"]) == ("add", 6, "add")
    assert jit["first_eqn"] == row["eqn"] and jit["compiles"] >= 2
    barrier = next(o for o in jit["options"] if o["option"] == "optimization_barrier")
    assert barrier["removes"] is True
    assert "fused multiply-add" in jit["cause"]
    (out,) = event["outputs"]
    # the run's value is jit's; the rows' are eager's, exact here (the products are
    # 1e30 and -1e30 in float32 too)
    assert float(out["eager"]["max"]) == 0.0
    assert float(out["run"]["max"]) == math.inf or float(out["run"]["max"]) > 1e10


def test_a_program_jit_leaves_alone_is_said_to_agree(run) -> None:
    code = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x) * 2\n"
    event = numerics(
        run(
            {
                "code": code,
                "args": "jnp.ones(3)",
                "transforms": [{"name": "jit"}],
                "outputs": ["numerics"],
            }
        )
    )
    assert event["jit"]["differs"] is False and event["jit"]["first_eqn"] is None


MATMUL = """import jax
import jax.numpy as jnp

def f(a, b):
    return a @ b
"""
MATMUL_ARGS = "jax.random.normal(jax.random.key(0), (64, 256)), jax.random.normal(jax.random.key(1), (256, 32))"


def test_precision_settings_side_by_side_against_plain_jax(run) -> None:
    settings = ["highest", "float64", "bfloat16", "bfloat16_params", "tpu_default"]
    event = numerics(
        run(
            {
                "code": MATMUL,
                "args": MATMUL_ARGS,
                "outputs": ["numerics"],
                "numerics_precision": settings,
            }
        )
    )
    want = reference(
        """
a32 = jax.random.normal(jax.random.key(0), (64, 256), jnp.float32)
b32 = jax.random.normal(jax.random.key(1), (256, 32), jnp.float32)
ref = np.asarray(a32, np.float64) @ np.asarray(b32, np.float64)
def norm(y):
    return float(np.abs(np.asarray(y, np.float64) - ref).max() / np.abs(ref).max())
bf = jnp.bfloat16
result = {
    "f32": norm(jnp.dot(a32, b32)),
    "tpu": norm(jnp.dot(a32.astype(bf), b32.astype(bf), preferred_element_type=jnp.float32)),
    "bf16": norm(jnp.dot(a32.astype(bf), b32.astype(bf)).astype(jnp.float32)),
}
tpu = np.asarray(jnp.dot(a32.astype(bf), b32.astype(bf), preferred_element_type=jnp.float32), np.float64)
tiny = float(jnp.finfo(jnp.float32).tiny)
result["tpu_rel_max"] = float((np.abs(tpu - ref) / np.maximum(np.abs(ref), tiny)).max())
"""
    )
    got = {s["setting"]: s for s in event["precision"]}
    assert list(got) == settings and all(s["error"] is None for s in got.values())
    norm = {k: float(s["outputs"][0]["norm"]) for k, s in got.items()}
    assert close(norm["highest"], want["f32"])
    assert norm["float64"] < 1e-15
    # the emulation is the bfloat16 product accumulated in float32; its sums' order may
    # differ from jnp.dot's by float32 noise, thousands of times smaller than the effect
    assert math.isclose(norm["tpu_default"], want["tpu"], rel_tol=0.02)
    assert math.isclose(norm["bfloat16"], want["bf16"], rel_tol=0.05)
    assert want["tpu"] > 100 * want["f32"]
    # params stored in bfloat16, the product in float32: bfloat16 products are exact in
    # float32, so this is the TPU's default again, up to the order of the sums
    assert math.isclose(norm["bfloat16_params"], want["tpu"], rel_tol=0.02)
    assert got["tpu_default"]["emulated"] is True
    # per line: the emulated setting stepped op by op, the product's line (5) and its error
    (line,) = got["tpu_default"]["lines"]
    assert line["line"] == 5
    assert math.isclose(float(line["error"]), want["tpu_rel_max"], rel_tol=0.02)
    # on the CPU the precision levels compute as float32 does: not stepped per line
    assert got["highest"]["lines"] == []
    assert (
        "every precision setting computes a float32 product in float32" in event["precision_note"]
    )
