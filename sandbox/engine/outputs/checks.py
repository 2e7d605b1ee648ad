"""The ``checks`` output: the request's one-click checks, run on a pipeline after its
other outputs (sandbox/protocol/checks.py lists them).

Each check calls the pipeline again, on the run's arguments, under what it checks
with: ``nans``/``infs``/``key_reuse`` under JAX's debug flags, ``checkify`` wrapped by
``jax.experimental.checkify``, ``grad`` through ``jax.test_util.check_grads``. A
problem found is a result (``failed``, with JAX's message and the user's line), never
an error of the run; the pipeline's other outputs are what they are without checks.

The flags are set with JAX's configuration context managers (``jax.debug_nans(True)``
...): thread-local values that end with the ``with``, so nothing is left in the
process for the run's next pipeline or a kept process's next run (the kept process's
check, sandbox/zygote/watch.py, compares ``jax.config``'s global values: untouched).
What the calls print (the function's own prints again, JAX's "Calling the de-optimized
version") is not relayed: the run's outputs already showed the first call's.
"""

from __future__ import annotations

import contextlib
import math
import re
import traceback as tb_module
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sandbox.engine.core.errors import find_hint, user_line
from sandbox.engine.core.jaxpr_walk import sub_jaxprs
from sandbox.engine.core.output import Output, Results
from sandbox.protocol.checks import CHECK_NAMES, MAX_CHECK_RESULTS
from sandbox.protocol.requests import SNIPPET_FILENAME

#: a result's message, at most (JAX's messages for a NaN under jit run long)
MAX_RESULT_MESSAGE = 4000
#: per check, the errors checkify reports at most (one per kind; under vmap per index)
MAX_CHECKIFY_ERRORS = 16
#: the config flag behind each debug check (``jax.debug_nans`` ... are its context managers)
DEBUG_FLAGS = {
    "nans": "jax_debug_nans",
    "infs": "jax_debug_infs",
    "key_reuse": "jax_debug_key_reuse",
}
_NUMBER = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan))"
_MAX_ABS = re.compile(r"Max absolute difference(?: among violations)?: " + _NUMBER)
_MAX_REL = re.compile(r"Max relative difference(?: among violations)?: " + _NUMBER)
_TOLERANCE = re.compile(r"rtol=(\S+), atol=(\S+)")
_NO_FORWARD = "forward-mode autodiff (jvp) to a custom_vjp function"

Result = dict[str, Any]


@dataclass
class Subject:
    """A pipeline to check: its function, the run's arguments, which are static."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    static_argnums: tuple[int, ...] = ()
    #: the pipeline donates its arguments: every call gets fresh copies
    donates: bool = False
    #: the user's module namespace (where custom_jvp/custom_vjp rules are looked for)
    namespace: dict[str, Any] = field(default_factory=dict)
    #: the pipeline's jaxpr as the run traced it (``make_jaxpr(fn, static_argnums)``),
    #: when an output asked for it; traced once here otherwise, when a check needs it
    closed: Any = None

    def jaxpr(self) -> Any:
        """The pipeline's traced jaxpr (the run's, or traced now: once)."""
        import jax

        if self.closed is None:
            self.closed = jax.make_jaxpr(self.fn, static_argnums=self.static_argnums)(*self.args)
        return self.closed

    def call(self) -> Any:
        import jax

        return jax.block_until_ready(self.fn(*self._fresh(self.args)))

    def _fresh(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        if not self.donates:
            return args
        from sandbox.engine.core.pipeline import copy_args

        return copy_args(args)

    def over(self, positions: list[int]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The pipeline as a function of the arguments at ``positions`` only (the others
        fixed at the run's values), and those arguments: what tracing wrappers take."""
        fixed = dict(enumerate(self.args))

        def fn(*chosen: Any) -> Any:
            full = dict(fixed)
            full.update(zip(positions, chosen, strict=True))
            return self.fn(*self._fresh(tuple(full[i] for i in range(len(self.args)))))

        return fn, tuple(self.args[i] for i in positions)

    def has_own_jit(self) -> bool:
        """The pipeline's outermost transform is jit or pmap: the run lowers it as it is
        (pipeline.py ``lowerable``); else the run lowers it under a plain ``jax.jit``."""
        return hasattr(self.fn, "lower")

    def dynamic(self) -> list[int]:
        return [i for i in range(len(self.args)) if i not in self.static_argnums]

    def differentiable(self) -> list[int]:
        """The non-static arguments whose every leaf is a floating-point (or complex) array."""
        import jax
        import jax.numpy as jnp

        def inexact(value: Any) -> bool:
            leaves = jax.tree_util.tree_leaves(value)
            try:
                return bool(leaves) and all(
                    jnp.issubdtype(jnp.result_type(leaf), jnp.inexact) for leaf in leaves
                )
            except TypeError:  # a leaf with no dtype (a string, an object)
                return False

        return [i for i in self.dynamic() if inexact(self.args[i])]


def result(name: str, status: str, message: str, line: int | None = None, **extra: Any) -> Result:
    if len(message) > MAX_RESULT_MESSAGE:
        message = message[:MAX_RESULT_MESSAGE] + f"… ({len(message) - MAX_RESULT_MESSAGE} more)"
    return {"name": name, "status": status, "message": message, "line": line, **extra}


def _failure(name: str, exc: BaseException, line: int | None = None) -> Result:
    """A check that found what it looks for: JAX's message, the line, the hint."""
    message = str(exc).strip() or type(exc).__name__
    mro = tuple(cls.__name__ for cls in type(exc).__mro__)
    hint = find_hint(type(exc).__name__, message, mro)
    extra = {"hint": hint.hint} if hint else {}
    return result(name, "failed", message, line if line is not None else user_line(exc), **extra)


def _broken(name: str, exc: BaseException) -> Result:
    """The check could not run: the pipeline raised something else under it."""
    return result(name, "error", f"{type(exc).__name__}: {exc}".strip(), user_line(exc))


class _Discard:
    """A text stream that keeps nothing (what the checks' calls print)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    sink: Any = _Discard()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


def _debug_flag(name: str) -> Callable[[bool], Any] | None:
    """``jax.debug_nans`` / ``debug_infs`` / ``debug_key_reuse``: the context manager
    of the check's flag, or None where this JAX version has no such flag
    (``jax_debug_key_reuse`` is newer than ``jax_debug_nans``; every offered version,
    0.4.38 on, has all three)."""
    from sandbox.engine.core.compat import config_context

    return config_context(DEBUG_FLAGS[name])


def check_debug_pair(subject: Subject) -> list[Result]:
    """``nans`` and ``infs`` both asked: one call under both flags first. JAX checks
    the same values under either flag (dispatch's ``check_special``: NaN, then Inf),
    so a call that raises nothing under both raises nothing under each: both are ok,
    at the cost of one call instead of two. A call that raises is not read (which
    flag raised, and at which operation, can differ from each flag's own run: a jit's
    output with an Inf, re-run de-optimized, may stop at an earlier NaN): each check
    then runs on its own, as when asked alone."""
    nans, infs = _debug_flag("nans"), _debug_flag("infs")
    if nans is not None and infs is not None:
        try:
            with nans(True), infs(True):
                subject.call()
        except Exception:
            pass
        else:
            return [_no_debug_value("nans"), _no_debug_value("infs")]
    return [check_debug_values(subject, "nans"), check_debug_values(subject, "infs")]


def _no_debug_value(name: str) -> Result:
    what = "NaN" if name == "nans" else "infinity"
    return result(name, "ok", f"no operation of the pipeline made a {what}")


def check_debug_values(subject: Subject, name: str) -> Result:
    """``nans``/``infs``: the pipeline under jax_debug_nans/infs. Under jit JAX runs the
    function again op by op to find the operation; where that leaves no user frame (a
    jit's backward pass), once more under ``disable_jit`` for the line."""
    import jax

    flag = _debug_flag(name)
    if flag is None:
        return result(name, "skipped", f"this JAX version has no {DEBUG_FLAGS[name]}")
    try:
        with flag(True):
            subject.call()
    except (FloatingPointError, ZeroDivisionError) as exc:
        line = user_line(exc)
        if line is None:
            try:
                with flag(True), jax.disable_jit():
                    subject.call()
            except (FloatingPointError, ZeroDivisionError) as again:
                line = user_line(again)
            except Exception:
                pass
        return _failure(name, exc, line)
    except Exception as exc:
        return _broken(name, exc)
    return _no_debug_value(name)


def _holds_keys(jaxpr: Any) -> bool:
    """Whether any value of ``jaxpr`` (its inputs, constants, every equation's inputs
    and outputs, inner jaxprs included) is a typed PRNG key."""
    import jax

    def key(var: Any) -> bool:
        dtype = getattr(getattr(var, "aval", None), "dtype", None)
        try:
            return dtype is not None and bool(jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key))
        except TypeError:
            return False

    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    if any(map(key, [*getattr(jaxpr, "constvars", ()), *jaxpr.invars, *jaxpr.outvars])):
        return True
    for eqn in jaxpr.eqns:
        if any(map(key, [*eqn.invars, *eqn.outvars])):
            return True
        if any(_holds_keys(inner) for inner in sub_jaxprs(eqn.params)):
            return True
    return False


def _may_reuse_keys(subject: Subject) -> bool:
    """False only where no key can be reused: no typed PRNG key anywhere in the
    pipeline's traced jaxpr (JAX's key reuse checks track typed keys only, and every
    key the pipeline uses, made inside or given, is a value of that jaxpr)."""
    try:
        return _holds_keys(subject.jaxpr())
    except Exception:  # tracing it again failed: the check itself says what happens
        return True


KEY_REUSE_OK = (
    "no PRNG key was used twice (JAX tracks typed keys, made by jax.random.key; a raw "
    "uint32 key of jax.random.PRNGKey is not checked)"
)


def check_key_reuse(subject: Subject) -> Result:
    """The pipeline under jax_debug_key_reuse: JAX raises at the key's second use. A
    pipeline whose jaxpr holds no typed key is not run again (nothing to track)."""
    flag = _debug_flag("key_reuse")
    if flag is None:
        return result(
            "key_reuse", "skipped", "this JAX version has no jax_debug_key_reuse (key reuse checks)"
        )
    if not _may_reuse_keys(subject):
        return result("key_reuse", "ok", KEY_REUSE_OK)
    try:
        with flag(True):
            subject.call()
    except Exception as exc:
        if any(cls.__name__ == "KeyReuseError" for cls in type(exc).__mro__):
            return _failure("key_reuse", exc)
        return _broken("key_reuse", exc)
    return result("key_reuse", "ok", KEY_REUSE_OK)


def _checkify_errors(error: Any) -> list[Any]:
    """Every error a checkify ``Error`` holds: the first of each kind (the ``Error``'s
    ``get`` shows only the first of all), each mapped index's under vmap."""
    import jax

    found = []
    try:
        for effect, pred in error._pred.items():
            if getattr(pred, "shape", ()):  # batched: get_exception lists every index
                continue
            if bool(pred):
                code = int(error._code[effect])
                found.append(
                    jax.tree_util.tree_unflatten(error._metadata[code], error._payload[effect])
                )
    except (AttributeError, KeyError, TypeError):  # a JAX whose Error is laid out otherwise
        found = []
    if not found:
        exc = error.get_exception()
        if exc is not None:
            found = list(getattr(exc, "error_mapping", {}).items()) or [exc]
    return found


def _traceback_line(exc: Any) -> int | None:
    info = getattr(exc, "traceback_info", None)
    if info is None:
        return None
    try:
        frames = tb_module.extract_tb(info.as_python_traceback())
    except Exception:
        return None
    lines = [f.lineno for f in frames if f.filename == SNIPPET_FILENAME]
    return lines[-1] if lines else None


def _described(found: list[Any]) -> list[tuple[str, int | None]]:
    described = []
    for item in found[:MAX_CHECKIFY_ERRORS]:
        if isinstance(item, tuple):  # (mapped index, error)
            index, exc = item
            message = f"at mapped index {', '.join(map(str, index))}: {exc}"
        else:
            exc, message = item, str(item)
        described.append((message.strip(), _traceback_line(exc)))
    return described


def check_checkify(subject: Subject) -> list[Result]:
    """The pipeline under ``checkify(errors=all_checks)``: each error it reports. An
    error made inside a function JAX itself jits (``jnp.floor_divide``) carries that
    function's frames only: its line comes from the same check under ``disable_jit``.

    The checkified function is called under ``jax.jit``: checkify traces the pipeline
    to a jaxpr either way, and called as it is evaluates that jaxpr an operation at a
    time, a compile per operation where the pipeline has no ``jit`` of its own (18
    compiles for a 14-equation ``grad``, against one)."""
    import jax
    from jax.experimental import checkify

    fn, args = subject.over(subject.dynamic())
    checked = checkify.checkify(fn, errors=checkify.all_checks)
    try:
        found = _checkify_errors(jax.jit(checked)(*args)[0])
    except Exception as exc:
        return [_broken("checkify", exc)]
    if not found:
        return [result("checkify", "ok", "checkify found no error (all_checks)")]
    described = _described(found)
    if any(line is None for _, line in described):
        try:
            with jax.disable_jit():
                lines = dict(_described(_checkify_errors(checked(*args)[0])))
        except Exception:
            lines = {}
        described = [(m, line if line is not None else lines.get(m)) for m, line in described]
    results = [result("checkify", "failed", m, line) for m, line in described]
    if len(found) > MAX_CHECKIFY_ERRORS:
        results.append(
            result("checkify", "failed", f"… and {len(found) - MAX_CHECKIFY_ERRORS} more errors")
        )
    return results


# --- grad ----------------------------------------------------------------------------


def _jaxpr_lines(jaxpr: Any, into: set[int]) -> None:
    """Every snippet line an equation of ``jaxpr`` (and its inner jaxprs) came from."""
    from jax._src import source_info_util

    for eqn in jaxpr.eqns:
        try:
            frames = list(source_info_util.user_frames(eqn.source_info.traceback))
        except AttributeError:  # 0.4.x: user_frames takes the SourceInfo
            frames = list(source_info_util.user_frames(eqn.source_info))
        into.update(int(f.start_line) for f in frames if f.file_name == SNIPPET_FILENAME)
        for inner in sub_jaxprs(eqn.params):
            _jaxpr_lines(inner, into)


def _code_lines(fn: Any) -> set[int]:
    code = getattr(fn, "__code__", None)
    if code is None or code.co_filename != SNIPPET_FILENAME:
        return set()
    lines = {line for _, _, line in code.co_lines() if line is not None}
    return set(range(code.co_firstlineno, max(lines, default=code.co_firstlineno) + 1))


def custom_rules(subject: Subject) -> list[tuple[str, str, int]]:
    """The custom_jvp/custom_vjp rules of the snippet the pipeline runs, as (kind, the
    rule function's name, its line): the module's ``custom_jvp``/``custom_vjp``
    functions any of whose code (the function, its rules) made an equation of the
    pipeline's jaxpr."""
    import jax

    rules: list[tuple[str, Any, list[Any]]] = []
    for value in list(subject.namespace.values()):
        if isinstance(value, jax.custom_vjp):
            kind, parts = "custom_vjp", [getattr(value, "bwd", None), getattr(value, "fwd", None)]
        elif isinstance(value, jax.custom_jvp):
            kind, parts = "custom_jvp", [getattr(value, "jvp", None)]
        else:
            continue
        parts = [p for p in parts if p is not None and _code_lines(p)]
        if parts:
            rules.append((kind, value, parts))
    if not rules:
        return []
    traced: set[int] = set()
    with contextlib.suppress(Exception):  # the run's jaxpr: the same equations and lines
        _jaxpr_lines(getattr(subject.jaxpr(), "jaxpr", subject.jaxpr()), traced)
    used = []
    for kind, value, parts in rules:
        code = set().union(_code_lines(getattr(value, "fun", None)), *map(_code_lines, parts))
        if code & traced:
            rule = parts[0]
            used.append((kind, rule.__name__, rule.__code__.co_firstlineno))
    return used


def _measure(pattern: re.Pattern[str], text: str) -> float | str | None:
    match = pattern.search(text)
    if match is None:
        return None
    value = float(match.group(1))
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _unjittable() -> tuple[type[BaseException], ...]:
    """What a value-dependent Python function raises under a jit it was not written for."""
    import jax

    names = (
        "ConcretizationTypeError",  # TracerBoolConversionError is one
        "TracerArrayConversionError",
        "TracerIntegerConversionError",
        "NonConcreteBooleanIndexError",
    )
    return tuple(getattr(jax.errors, n) for n in names if hasattr(jax.errors, n))


#: what a result says where the fallback ran: the pipeline without our jit
AS_IS = " (the pipeline called as it is: jax.jit cannot trace it)"


def check_grad(subject: Subject, orders: list[int], modes: list[str]) -> list[Result]:
    """``jax.test_util.check_grads`` of the pipeline over its floating-point arguments,
    once per order and mode: pass or fail, JAX's max absolute and relative errors, and
    the custom rule's line (each result's ``line``).

    What is checked is the program the run compiles: the pipeline's own jit or pmap,
    else the pipeline under ``jax.jit`` (of the closure over the chosen arguments: the
    others, static, integer or any Python value, constants of the closure). Called as it
    is, a pipeline without a jit would be evaluated an operation at a time, a compile
    per operation and per derivative (25 compiles for a 14-equation ``grad``, 7 under
    jit); and its finite differences are of the compiled program's values, which are
    the run's. Where ``jax.jit`` cannot trace the pipeline (it reads a value in Python),
    the pipeline as it is, as the run calls it."""
    import jax
    from jax.test_util import check_grads

    unjittable = _unjittable()

    positions = subject.differentiable()
    if not positions:
        return [result("grad", "skipped", "no floating-point argument to differentiate")]
    try:
        rules = custom_rules(subject)
    except Exception:
        rules = []
    where = "; ".join(f"{kind} rule {name} at line {line}" for kind, name, line in rules)
    line = rules[0][2] if rules else None
    bare, args = subject.over(positions)
    fn = bare if subject.has_own_jit() else jax.jit(bare)
    as_is = ""  # AS_IS once the fallback ran
    results = []
    for order in orders:
        for mode in modes:
            about = {"order": order, "mode": mode}
            try:
                try:
                    check_grads(fn, args, order=order, modes=[mode])
                except unjittable:
                    if fn is bare:
                        raise
                    # The jit we added cannot trace it (Python control flow on a value,
                    # NumPy on a value): neither can the run's lowering; its call, as it
                    # is, can, and so does check_grads on the pipeline as it is.
                    fn, as_is = bare, AS_IS
                    check_grads(fn, args, order=order, modes=[mode])
            except AssertionError as exc:
                text = "\n".join(s for s in str(exc).strip().splitlines() if s.strip())
                results.append(
                    result(
                        "grad",
                        "failed",
                        text + (f"\n({where})" if where else "") + as_is,
                        line,
                        max_abs_error=_measure(_MAX_ABS, text),
                        max_rel_error=_measure(_MAX_REL, text),
                        **about,
                    )
                )
                continue
            except TypeError as exc:
                if mode == "fwd" and _NO_FORWARD in str(exc):
                    results.append(result("grad", "skipped", f"{exc}", line, **about))
                    continue
                results.append({**_broken("grad", exc), **about})
                continue
            except Exception as exc:
                results.append({**_broken("grad", exc), **about})
                continue
            said = f"order {order} ({mode}) matches finite differences" + as_is
            results.append(
                result("grad", "ok", said + (f" ({where})" if where else ""), line, **about)
            )
    return results


def run_checks(
    subject: Subject, names: list[str], grad_orders: list[int], grad_modes: list[str]
) -> dict[str, Any]:
    """The ``checks`` event of one pipeline: each check asked, in the table's order."""
    results: list[Result] = []
    with _quiet():
        for name in CHECK_NAMES:
            if name not in names:
                continue
            if name == "nans" and "infs" in names:
                results.extend(check_debug_pair(subject))
            elif name == "infs" and "nans" in names:
                continue  # with nans, in the table's order
            elif name in ("nans", "infs"):
                results.append(check_debug_values(subject, name))
            elif name == "key_reuse":
                results.append(check_key_reuse(subject))
            elif name == "checkify":
                results.extend(check_checkify(subject))
            else:
                results.extend(check_grad(subject, grad_orders, grad_modes))
    return {"type": "checks", "results": results[:MAX_CHECK_RESULTS]}


def checks_event(r: Results) -> dict[str, Any]:
    """The checks of one pipeline's ``Results``: its pipeline, its arguments, the
    namespace of the user's module, and the request's checks."""
    pipe, context = r.pipeline.pipe, r.pipeline.run
    request = context.request
    subject = Subject(
        pipe.fn, context.args, pipe.static_argnums, pipe.donates, dict(context.namespace), r.closed
    )
    return run_checks(
        subject, list(request.checks), list(request.grad_orders), list(request.grad_modes)
    )


def _prepare() -> None:
    """What the checks import, in the baseline of a zygote's kept processes:
    imported by a run, they would retire it (zygote/watch.py)."""
    import jax.experimental.checkify
    import jax.experimental.key_reuse._core
    import jax.test_util  # noqa: F401


OUTPUT = Output("executed", "running the checks", checks_event, prepare=_prepare)
