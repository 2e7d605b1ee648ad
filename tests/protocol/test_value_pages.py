"""Value pages on the wire (docs/api.md "Value pages"): the request's ``value_from``, a
bounded count, refused plainly otherwise, REST's body included; the value event's page
fields and the shapes event's ``spans_left_out`` are additive (an event without them
still passes) and checked where they are given."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from backend.app.core.wire import RunBody
from sandbox.protocol.lines import BadEvent, parse_event_line, validate_event
from sandbox.protocol.requests import MAX_VALUE_FROM, RunRequest

LEAF = {"path": "[0]", "shape": [], "dtype": "float32", "sha256": "0" * 64, "data": [1.0]}
VALUE = {"type": "value", "pipeline": "main", "repr": "[1.0]", "tree": [LEAF]}


def test_value_from_defaults_to_the_first_leaf_and_takes_any_count_up_to_its_bound() -> None:
    assert RunRequest(code="").value_from == 0
    assert RunRequest(code="", value_from=MAX_VALUE_FROM).value_from == MAX_VALUE_FROM
    assert RunBody.model_validate({"code": "", "value_from": 4096}).value_from == 4096


@pytest.mark.parametrize("bad", [-1, MAX_VALUE_FROM + 1, 1.5, "3", True, None])
def test_value_from_that_is_no_bounded_count_is_refused_by_name(bad: Any) -> None:
    for model in (RunRequest, RunBody):
        with pytest.raises(ValidationError) as caught:
            model.model_validate({"code": "", "value_from": bad})
        assert [e["loc"] for e in caught.value.errors()] == [("value_from",)]


def test_the_value_events_page_fields_are_additive() -> None:
    assert validate_event(VALUE)["tree"] == [LEAF | {"summary": None}]
    paged = VALUE | {"first_leaf": 4096, "total_leaves": 5000, "data_stops_at": None}
    line = parse_event_line(json.dumps(paged).encode())
    assert (line["first_leaf"], line["total_leaves"], line["data_stops_at"]) == (4096, 5000, None)


@pytest.mark.parametrize("field", ["first_leaf", "total_leaves", "data_stops_at"])
def test_a_page_field_is_a_count(field: str) -> None:
    with pytest.raises(BadEvent, match=field):
        validate_event(VALUE | {field: -1})


def test_the_shapes_events_left_out_count_is_additive_and_a_count() -> None:
    shapes = {"type": "shapes", "pipeline": "main", "source": "entry", "spans": [], "notes": []}
    assert validate_event(shapes)["spans_left_out"] is None
    assert validate_event(shapes | {"spans_left_out": 15})["spans_left_out"] == 15
    with pytest.raises(BadEvent, match="spans_left_out"):
        validate_event(shapes | {"spans_left_out": -1})
