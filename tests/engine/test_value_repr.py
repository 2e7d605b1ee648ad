"""The value's ``repr`` is bounded (sandbox/engine/outputs/value/): an output of many
arrays prints only the leaves its first MAX_REPR characters need, those characters
are ``repr(output)``'s, and it says how many leaves it left out; the ``tree`` still
describes every leaf."""

from __future__ import annotations

import jax.numpy as jnp

from sandbox.engine.outputs import value


def test_a_big_gradients_repr_is_its_first_characters_and_says_what_it_left_out() -> None:
    grads = [(jnp.full((64, 64), i, jnp.float32), jnp.zeros(64)) for i in range(100)]
    event = value.value_event(grads)
    whole = repr(grads)
    assert len(whole) > 3 * value.MAX_REPR
    text = event["repr"]
    head, _, note = text.rpartition("\n")
    assert head == whole[: value.MAX_REPR]
    left_out = int(note.split("the rest not shown: ")[1].split(" of ")[0])
    assert note == f"… (the rest not shown: {left_out} of 200 leaves)"
    assert 100 < left_out < 200  # the leaves the bound needed were printed, not the rest
    assert len(event["tree"]) == 200


def test_a_small_output_is_printed_whole() -> None:
    out = {"w": jnp.ones((3, 3)), "b": jnp.arange(3)}
    assert value.value_event(out)["repr"] == repr(out)
