"""``jaxplay run --output numerics``'s text: the event of a cancellation made in this
process by the engine's shadow (JAX imported here), checked by the event model and
rendered; and a real run through the CLI whose text shows the rows its JSON holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from backend.cli.render.events import render_event
from sandbox.engine.core.emitter import json_safe
from sandbox.engine.outputs.numerics import numerics_event
from sandbox.protocol.events import NumericsEvent
from tests.cli.test_cli import events_of, real_run, served  # noqa: F401 (a fixture)


def f(x):
    return jnp.log(1 + x) - jnp.mean(x)


def test_the_text_has_a_line_per_row_and_the_hint_under_its_row() -> None:
    x = jnp.array([1e-7, 1e-6, 1e-5], jnp.float32)
    event = json_safe(numerics_event(jax.make_jaxpr(f)(x), [x], jax.jit(f)(x), max_values=10_000))
    event["pipeline"] = "main"
    NumericsEvent.model_validate(event)
    text = render_event(event)
    assert text is not None
    lines = text.splitlines()
    rows = event["rows"]
    assert lines[0] == f"── numerics: {len(rows)} rows against a float64 shadow, cpu ──"
    assert lines[1].startswith("  output float32[3]: as run ")
    worst = rows[event["worst_born"]]
    assert worst["primitive"] == "log"
    assert lines[2].startswith(f"  most error born: row {event['worst_born']}, log")
    table = [line for line in lines if line[:1] in (" ", "*", "~") and line[2:7].strip().isdigit()]
    assert [int(line.split()[1 if line.startswith("*") else 0]) for line in table] == list(
        range(len(rows))
    )
    starred = next(n for n, line in enumerate(lines) if line.startswith("*"))
    assert lines[starred + 1].strip().startswith("hint: log(1 + x)")


def test_a_refusal_is_said() -> None:
    x = jnp.ones((10, 10))
    event = json_safe(numerics_event(jax.make_jaxpr(jnp.sin)(x), [x], None, max_values=5))
    text = render_event({**event, "pipeline": "main"})
    assert text is not None and "refused: the numerics lens" in text


@real_run
def test_the_cli_shows_the_rows_its_json_holds(served: Callable[..., Any], tmp_path: Path) -> None:  # noqa: F811
    path = tmp_path / "cancel.py"
    path.write_text("import jax.numpy as jnp\n\ndef f(x):\n    return (1 - jnp.cos(x)) / x**2\n")
    argv = ("run", str(path), "--args", "jnp.array([1e-3, 0.5])", "--output", "numerics")
    as_json = served(*argv, "--json")
    assert as_json.returncode == 0, as_json.stderr[-3000:]
    (event,) = [e for e in events_of(as_json) if e["type"] == "numerics"]
    as_text = served(*argv)
    assert as_text.returncode == 0, as_text.stderr[-3000:]
    want = render_event(event)
    assert want is not None
    # the text shows the event the JSON holds (the shadow's time, which differs between
    # the runs, is not in the text): every line of it, the rows among them
    shown = as_text.stdout.splitlines()
    assert [line for line in want.splitlines() if line in shown] == want.splitlines()
    assert any(" sub " in line and line.startswith("*") for line in shown)


def test_the_jit_comparison_and_the_settings_are_said() -> None:
    from sandbox.protocol.requests import SNIPPET_FILENAME

    code = "import jax.numpy as jnp\n\ndef f(a, b, x, m):\n    s = a * x + b * x\n    return s, jnp.tanh(m @ m)\n"
    namespace: dict = {}
    exec(compile(code, SNIPPET_FILENAME, "exec"), namespace)
    f = jax.jit(namespace["f"])
    m = jax.random.normal(jax.random.key(0), (32, 32))
    args = (jnp.float32(1e20), jnp.float32(-1e20), jnp.float32(1e10), m)
    event = json_safe(
        numerics_event(
            jax.make_jaxpr(f)(*args), list(args), f(*args), max_values=10**6,
            settings=["highest", "tpu_default"], rerun=(f, args), jitted=True,
        )
    )  # fmt: skip
    event["pipeline"] = "main"
    NumericsEvent.model_validate(event)
    text = render_event(event)
    assert text is not None
    assert "  jit changes the result (op by op is nearer float64)" in text
    assert "    first differs at eqn 0.2 (add) at line 4, found in" in text
    assert "recompiled with optimization_barrier=before equation 0.2: removes it" in text
    assert "    cause: the equation fused with the ones that make its operands" in text
    assert "  precision settings (normwise relative error per output):" in text
    tpu = next(line for line in text.splitlines() if line.startswith("    TPU default"))
    norm = float(event["precision"][1]["outputs"][1]["norm"])
    assert "(emulated)" in tpu and tpu.endswith(f"{norm:.3g}")
    per_line = next(ln for ln in text.splitlines() if "largest relative error per line" in ln)
    assert "line 5: " in per_line  # the product's line, where the bfloat16 operands are
