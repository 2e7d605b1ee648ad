"""The value's leaves in pages (the request's ``value_from``;
sandbox/engine/outputs/value/): a page holds MAX_LEAVES leaves from its first, its data
budget counts from there, and the event says where the page sits in the value."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from sandbox.engine.outputs.value import value_event
from sandbox.protocol.events import ValueEvent
from sandbox.protocol.limits import MAX_LEAF_DATA, MAX_LEAVES, MAX_VALUE_DATA


def _scalars(n: int) -> list[Any]:
    return [jnp.float32(i) for i in range(n)]


def test_the_first_page_is_todays_event_with_where_it_sits() -> None:
    out = _scalars(5000)
    event = value_event(out)
    assert len(event["tree"]) == MAX_LEAVES
    assert (event["first_leaf"], event["total_leaves"], event["data_stops_at"]) == (0, 5000, None)
    assert [leaf["data"] for leaf in event["tree"][:3]] == [[0.0], [1.0], [2.0]]
    assert event["tree"][-1]["path"] == f"[{MAX_LEAVES - 1}]"
    ValueEvent.model_validate(event)


def test_a_later_page_holds_the_leaves_from_its_first() -> None:
    out = _scalars(5000)
    event = value_event(out, 4000)
    assert len(event["tree"]) == 1000  # to the end
    assert event["tree"][0]["path"] == "[4000]" and event["tree"][0]["data"] == [4000.0]
    assert event["tree"][-1]["path"] == "[4999]" and event["tree"][-1]["data"] == [4999.0]
    assert (event["first_leaf"], event["total_leaves"]) == (4000, 5000)
    ValueEvent.model_validate(event)


def test_the_data_budget_counts_from_the_pages_first_leaf() -> None:
    # leaves of MAX_LEAF_DATA elements: the budget holds this many of them
    fit = MAX_VALUE_DATA // MAX_LEAF_DATA
    out = [jnp.full((16, 16), i, jnp.float32) for i in range(fit + 40)]
    first = value_event(out)
    assert [leaf["data"] is not None for leaf in first["tree"]] == [True] * fit + [False] * 40
    assert first["data_stops_at"] == fit
    # a page from the first leaf left without data gives its data
    later = value_event(out, fit)
    assert len(later["tree"]) == 40 and later["data_stops_at"] is None
    assert all(leaf["data"] == [float(fit + i)] * 256 for i, leaf in enumerate(later["tree"]))
    ValueEvent.model_validate(later)


def test_a_leaf_too_big_for_data_does_not_stop_the_budget() -> None:
    out = [jnp.ones((64, 64)), jnp.float32(3)]
    event = value_event(out)
    assert [leaf["data"] for leaf in event["tree"]] == [None, [3.0]]
    assert event["data_stops_at"] is None


def test_a_page_from_past_the_end_is_empty_and_says_how_many_there_are() -> None:
    event = value_event({"a": jnp.ones(2), "b": jnp.zeros(3)}, 7)
    assert event["tree"] == [] and (event["first_leaf"], event["total_leaves"]) == (7, 2)
    assert event["repr"].startswith("{'a':")  # the repr is the whole value's, as on page 0
    ValueEvent.model_validate(event)


def test_a_pages_paths_are_the_flatten_orders() -> None:
    out = {"b": [jnp.ones(1), jnp.ones(2)], "a": jnp.ones(3)}
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(out)[0]]
    assert [leaf["path"] for leaf in value_event(out, 1)["tree"]] == paths[1:]


def test_a_run_asks_for_a_page(run: Any) -> None:
    events = run(
        {
            "code": "def f(x):\n    return [x * i for i in range(5000)]\n",
            "args": "(jnp.float32(2.0),)",
            "outputs": ["value"],
            "value_from": 4095,
        }
    )
    (value,) = [e for e in events if e["type"] == "value"]
    assert (value["first_leaf"], value["total_leaves"], len(value["tree"])) == (4095, 5000, 905)
    assert value["tree"][0]["path"] == "[4095]" and value["tree"][0]["data"] == [8190.0]
