"""The one-click checks a request may ask for (``checks``): the table of their names
and what each does. The engine runs them (sandbox/engine/outputs/checks.py); their results
travel as one ``checks`` event per pipeline (events.py ``ChecksEvent``)."""

from __future__ import annotations

from typing import Literal

CheckName = Literal["nans", "infs", "key_reuse", "checkify", "grad"]
#: What each check does, in the order the results come (docs/api.md names them too)
CHECKS: dict[str, str] = {
    "nans": "the pipeline run under jax_debug_nans: the first operation that made a NaN, "
    "at its line",
    "infs": "the pipeline run under jax_debug_infs: the first operation that made an "
    "infinity, at its line",
    "key_reuse": "the pipeline run under jax_debug_key_reuse: a PRNG key used twice, at the "
    "line of its second use",
    "checkify": "the pipeline under jax.experimental.checkify with all its error sets "
    "(out-of-bounds indexing, division by zero, NaNs, user checks): each error at its line",
    "grad": "jax.test_util.check_grads of the pipeline at the run's arguments, in the "
    "orders and modes asked: by how much a derivative is off, and where the "
    "custom_jvp/custom_vjp rule is",
}
CHECK_NAMES: tuple[CheckName, ...] = CheckName.__args__  # type: ignore[attr-defined]
assert tuple(CHECKS) == CHECK_NAMES
CheckStatus = Literal["ok", "failed", "error", "skipped"]
GradMode = Literal["fwd", "rev"]
GRAD_MODES: tuple[GradMode, ...] = GradMode.__args__  # type: ignore[attr-defined]
#: the highest derivative order ``grad`` checks (check_grads' cost grows with it)
MAX_GRAD_ORDER = 3
#: results in one checks event: one per check, ``grad`` one per order and mode, and
#: ``checkify`` one per error it found (under vmap, per mapped index)
MAX_CHECK_RESULTS = 64
