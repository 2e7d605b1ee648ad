"""How ``jaxplay run`` shows the shapes output: one line per span, columns from 1."""

from __future__ import annotations

from backend.cli.render.events import render_event


def test_each_span_is_a_line_with_its_type_and_batch() -> None:
    event = {
        "type": "shapes",
        "pipeline": "main",
        "source": "entry",
        "spans": [
            {"line": 2, "col": 17, "end_line": 2, "end_col": 22, "shape": [4, 2], "dtype": "float32",
             "primitive": "dot_general", "batched_shape": [5, 4, 2], "batch_dims": [0]},
            {"line": 3, "col": 4, "end_line": 4, "end_col": 9, "shape": [], "dtype": "int32",
             "primitive": "add", "sharding": "P('x',)"},
        ],
        "notes": ["1 batched shape(s) fit the per-example shape more than one way"],
    }  # fmt: skip
    assert render_event(event) == (
        "── shapes: 2 expressions (entry) ──\n"
        "  2:18-22        float32[4,2]  batched [5,4,2] (batch dims [0])  dot_general\n"
        "  3:5-4:9        int32[]  P('x',)  add\n"
        "  note: 1 batched shape(s) fit the per-example shape more than one way"
    )
