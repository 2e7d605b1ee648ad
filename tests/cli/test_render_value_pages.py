"""How ``jaxplay run`` says which leaves a value event describes (docs/api.md "Value
pages"), from the engine's own events; and ``--value-from`` refused when it is no count."""

from __future__ import annotations

import jax.numpy as jnp

from backend.cli.render.events import render_event, value_page_text
from sandbox.engine.outputs.value import value_event
from tests.support.cli import in_process


def test_a_whole_value_says_nothing_more() -> None:
    event = value_event([jnp.ones(2), jnp.zeros(3)])
    assert value_page_text(event) is None
    assert "leaves" not in render_event({**event, "pipeline": "main"})


def test_the_first_page_of_many_leaves_names_the_next() -> None:
    event = value_event([jnp.float32(i) for i in range(5000)])
    assert value_page_text(event) == "leaves 1–4096 of 5000 (--value-from 4096 for more)"
    assert render_event({**event, "pipeline": "main"}).endswith(
        "\n  leaves 1–4096 of 5000 (--value-from 4096 for more)"
    )


def test_a_later_page_names_the_ones_before() -> None:
    event = value_event([jnp.float32(i) for i in range(5000)], 4096)
    assert value_page_text(event) == "leaves 4097–5000 of 5000 (--value-from 0 for the ones before)"


def test_leaves_past_the_data_budget_name_where_to_ask_from() -> None:
    event = value_event([jnp.ones((16, 16)) for _ in range(300)])
    assert value_page_text(event) == (
        "data for leaves 257–300 past the 65,536-element budget (--value-from 256 for it)"
    )


def test_a_page_past_the_end_says_how_many_there_are() -> None:
    event = value_event([jnp.ones(2)], 5)
    assert (
        value_page_text(event) == "no leaves from 5: the value has 1 (--value-from 0 for the first)"
    )


def test_shapes_cut_say_how_many_of_all() -> None:
    event = {
        "type": "shapes", "pipeline": "main", "source": "entry", "spans_left_out": 15,
        "spans": [{"line": 2, "col": 4, "end_line": 2, "end_col": 9, "shape": [3],
                   "dtype": "float32", "primitive": "sin"}],
        "notes": ["15 more spans not shown"],
    }  # fmt: skip
    assert render_event(event).splitlines()[0] == "── shapes: 1 of 16 expressions (entry) ──"
    assert render_event(event).endswith("note: 15 more spans not shown")


def test_a_negative_value_from_is_refused_before_anything_runs() -> None:
    proc = in_process("run", "--request", "-", "--value-from", "-1", stdin='{"code": ""}')
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert proc.stdout.strip() == "" and "value_from" in proc.stderr
    assert "Traceback" not in proc.stderr
