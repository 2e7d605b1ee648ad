"""Hints: the usual cure for an equation where error is born, each a rule over the
row (its primitive, its born error, what made its inputs). A rule fires only where
the equation itself lost digits (``born`` past ``LOST_ULPS``), never on a value that
only carries an earlier equation's error on.

Each rule is tested on a snippet that needs it and on its cure
(tests/engine/test_numerics_hints.py)."""

from __future__ import annotations

import math
from collections.abc import Callable

from sandbox.engine.outputs.numerics.shadow import Row

#: an equation that adds more than this many ulps of its dtype lost digits of its own
#: (an elementary operation adds at most a few: a half for +, -, *, /, sqrt)
LOST_ULPS = 64.0
#: bits of the operands that cancel before a sub (or add) is called a cancellation
CANCELLED_BITS = 8.0


def _lost(row: Row) -> bool:
    return row.born is not None and (row.born.max_ulp >= LOST_ULPS or math.isinf(row.born.max))


def _is_one(value: object) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_is_one(v) for v in value)
    return value == 1 or value == 1.0


def _ones(row: Row) -> list[bool]:
    """Per input: it is the constant 1 (a literal)."""
    return [v is not None and _is_one(v) for v in row.facts.get("literals", [])]


def expm1(row: Row) -> str | None:
    if row.primitive != "sub" or not _lost(row):
        return None
    producers, ones = row.facts.get("producers", []), _ones(row)
    if len(producers) == 2 and producers[0] == "exp" and ones[1]:
        return "exp(x) - 1 cancels for small x (exp(x) is about 1): use jnp.expm1(x)"
    return None


def log1p(row: Row) -> str | None:
    if row.primitive != "log" or not _lost(row):
        return None
    made_by = row.facts.get("producer_rows", [None])[0]
    if made_by is not None and made_by.primitive == "add" and any(_ones(made_by)):
        return (
            "log(1 + x) loses x's digits when x is small (1 + x is rounded first): use jnp.log1p(x)"
        )
    return None


def subtract_max(row: Row) -> str | None:
    if row.primitive != "exp" or not row.facts.get("overflowed"):
        return None
    top = row.facts.get("input_max")
    where = f" (inputs up to {top:.4g})" if isinstance(top, float) and math.isfinite(top) else ""
    return (
        f"exp overflowed {row.dtype}{where}: subtract the maximum first, as jax.nn.softmax "
        "and jax.nn.logsumexp do (exp(x - x.max()))"
    )


def logsumexp(row: Row) -> str | None:
    if row.primitive != "log" or row.error is None or not math.isinf(row.error.max):
        return None
    made_by = row.facts.get("producer_rows", [None])[0]
    summed = made_by is not None and made_by.primitive == "reduce_sum"
    inner = made_by.facts.get("producer_rows", [None])[0] if summed else None
    if inner is not None and inner.primitive in ("exp", "convert_element_type"):
        return "log(sum(exp(x))) overflows where the answer does not: use jax.nn.logsumexp(x)"
    return None


def cancellation(row: Row) -> str | None:
    if row.primitive not in ("sub", "add") or not _lost(row):
        return None
    bits = row.facts.get("cancelled_bits")
    if bits is None or bits < CANCELLED_BITS:
        return None
    return (
        f"a - b with a ≈ b: about {bits:.0f} leading bits cancel, and the rounding of a and b "
        "is all that is left. Compute the difference another way: subtract before squaring "
        "(a two-pass variance: mean((x - mean(x))**2)), or use an identity "
        "(1 - cos(x) = 2*sin(x/2)**2)"
    )


def sum_order(row: Row) -> str | None:
    if row.primitive not in ("reduce_sum", "cumsum") or not _lost(row):
        return None
    return (
        f"this sum in {row.dtype} lost digits (its terms cancel, or it accumulates in a narrow "
        "dtype): sum in a wider dtype (x.astype(jnp.float32).sum()), subtract a shift first, "
        "or reorder the terms (sort by magnitude, sum pairwise)"
    )


#: the rules, most specific first: a row takes the first that fires
RULES: tuple[tuple[str, Callable[[Row], str | None]], ...] = (
    ("expm1", expm1),
    ("log1p", log1p),
    ("subtract_max", subtract_max),
    ("logsumexp", logsumexp),
    ("cancellation", cancellation),
    ("sum_order", sum_order),
)


def hint(row: Row) -> tuple[str, str] | None:
    for name, rule in RULES:
        text = rule(row)
        if text is not None:
            return name, text
    return None
