"""Narrow floats in a ``value``'s data: their own shortest decimal, read back the same."""

from __future__ import annotations

import decimal
import json

import ml_dtypes
import numpy as np
import pytest

from sandbox.engine.outputs.value import value_event
from sandbox.engine.outputs.value.shortest import shortest_float64


def _numpy_shortest(values: np.ndarray) -> np.ndarray:
    """NumPy's own shortest form (Dragon4), the reference for float16 and float32."""
    return values.astype(str).astype(np.float64)


def _own_shortest(value: float, dtype: np.dtype) -> float:
    """The fewest significant digits that cast back to ``value`` in ``dtype``: the
    decimals of k digits either side of it, exactly (decimal), one k at a time."""
    target = np.array(value).astype(dtype)
    exact = decimal.Decimal(value)
    for digits in range(1, 18):
        step = decimal.Decimal(1).scaleb(exact.adjusted() - digits + 1)
        for rounding in (decimal.ROUND_FLOOR, decimal.ROUND_CEILING):
            candidate = float(exact.quantize(step, rounding=rounding))
            if np.array(candidate).astype(dtype) == target:
                return candidate
    raise AssertionError(value)


def _digits(x: float) -> int:
    mantissa = repr(abs(x)).split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa.rstrip("0")) or 1


def test_every_float16_is_numpys_shortest_form() -> None:
    every = np.arange(2**16, dtype=np.uint16).view(np.float16)
    finite = every[np.isfinite(every)]
    got = shortest_float64(finite)
    np.testing.assert_array_equal(got, _numpy_shortest(finite))
    assert np.array_equal(got.astype(np.float16).view(np.uint16), finite.view(np.uint16))


def test_float32s_are_numpys_shortest_form() -> None:
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    anywhere = bits.view(np.float32)  # every exponent: most out of the vectorised range
    typical = (rng.standard_normal(200_000) * 10.0 ** rng.integers(-14, 23, 200_000)).astype(
        np.float32
    )
    for values in (anywhere[np.isfinite(anywhere)], typical):
        got = shortest_float64(values)
        np.testing.assert_array_equal(got, _numpy_shortest(values))
        assert np.array_equal(got.astype(np.float32).view(np.uint32), values.view(np.uint32))


@pytest.mark.parametrize(
    "dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]
)
def test_ml_dtypes_read_back_the_same_in_their_own_digits(dtype: type) -> None:
    bits = np.uint16 if np.dtype(dtype).itemsize == 2 else np.uint8
    every = np.arange(np.iinfo(bits).max + 1, dtype=bits).view(dtype)
    finite = every[np.isfinite(every.astype(np.float32))]
    got = shortest_float64(finite)
    assert np.array_equal(got.astype(dtype).view(bits), finite.view(bits))
    # their own shortest (not float32's) wherever the exponent allows the fast way
    wide = finite.astype(np.float64)
    vectorised = (wide != 0) & (np.abs(wide) >= 1e-14) & (np.abs(wide) < 1e23)
    sample = np.flatnonzero(vectorised)[:: max(1, vectorised.sum() // 3000)]
    for i in sample:
        want = _own_shortest(float(wide[i]), np.dtype(dtype))
        assert _digits(float(got[i])) == _digits(want), (wide[i], got[i], want)


def test_specials_are_kept() -> None:
    values = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 3.4028235e38], np.float32)
    got = shortest_float64(values)
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf
    assert got[3] == 0.0 and not np.signbit(got[3]) and np.signbit(got[4])
    assert repr(float(got[5])) == "1e-45" and repr(float(got[6])) == "3.4028235e+38"


def test_a_float32_leaf_s_data_is_short_and_reads_back_the_same() -> None:
    leaf = (np.arange(1, 257, dtype=np.float32) / 7).reshape(16, 16)  # MAX_LEAF_DATA
    data = value_event(leaf)["tree"][0]["data"]
    text = json.dumps(data)
    assert "0.14285715" in text and "0.14285714924335480" not in text  # float32's digits
    back = np.array(json.loads(text), dtype=np.float32).reshape(16, 16)
    assert np.array_equal(back.view(np.uint32), leaf.view(np.uint32))
    wide = json.dumps(leaf.astype(np.float64).reshape(-1).tolist())
    assert len(text) < 0.7 * len(wide)


def test_a_float64_leaf_keeps_every_digit() -> None:
    leaf = np.arange(1, 11, dtype=np.float64) / 7
    assert value_event(leaf)["tree"][0]["data"] == leaf.tolist()


def test_a_value_s_leaves_converted_together_are_each_their_own() -> None:
    rng = np.random.default_rng(3)
    leaves = {
        "a": rng.standard_normal(3).astype(np.float32),
        "b": rng.standard_normal((2, 2)).astype(ml_dtypes.bfloat16),
        "c": np.arange(5, dtype=np.int32),
        "d": rng.standard_normal(300).astype(np.float32),  # over a leaf's data bound
        "e": (rng.standard_normal(4) + 1j).astype(np.complex64),
        "f": rng.standard_normal((7, 1)).astype(np.float32),
        "g": rng.standard_normal(2).astype(ml_dtypes.bfloat16),
    }
    tree = value_event(leaves)["tree"]
    assert [leaf["path"] for leaf in tree] == [f"['{k}']" for k in leaves]
    for leaf, (name, values) in zip(tree, leaves.items(), strict=True):
        alone = value_event({name: values})["tree"][0]
        assert leaf == alone, name
    assert tree[3]["data"] is None and len(tree[5]["data"]) == 7
    back = np.array(tree[1]["data"], dtype=np.float64).astype(ml_dtypes.bfloat16)
    assert np.array_equal(back.view(np.uint16), leaves["b"].reshape(-1).view(np.uint16))
