"""Eager operations' executables, shared between jails by the template's compiler:
the run's side (what it records; the zygote's side: sandbox/zygote/eager_link.py; the
compiler: sandbox/zygote/eager_compiler.py).

A fresh process compiles each eager operation the first time it meets its types: a
module's ``jnp.array`` constants and a run's ``jnp.ones`` arguments cost ~10-30 ms of
XLA each in every new jail, as they do in a fresh ``python``. The jail template's
compiler is a process that never runs anyone's code; it compiles eager primitives
from their *descriptions* and keeps the executables in its own JAX persistent cache.
Before each run the jail's zygote writes what the compiler has learnt into the jail's
own cache (as it writes the template's seed), so JAX loads those instead of compiling.

What a run does here, and all it does: during its set-up (its module's top level and
its arguments: ``sharing()``; never the function under study, whose compiles and
timings stay its own), a compile of one of ``TABLE``'s primitives that misses the
jail's cache is recorded with the primitive's description (its params and argument
types, in the small codec below). After the set-up the engine writes those
descriptions to a pipe its zygote reads once the run is over (``report``). The run
holds no channel out of its jail: the pipe's other end is its own zygote's.

What keeps it honest: the descriptions are the run's word and nothing more. The
compiler compiles a description itself, with JAX's own callable for that primitive,
and JAX stores the result under the key that compile computes; the key a run wrote
beside it is never trusted. What another tenant can learn: that some run's set-up
compiled an eager primitive of those types before (its next jail loads it), as the
result cache tells that someone ran the same code.

Versions: the hooks are JAX's private ``compilation_cache._get_cache`` and each
primitive's ``impl``, alike from 0.4.38 to 0.12; where either is missing, nothing is
installed and nothing is recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: The primitives whose eager executables are shared: what array constants and
#: arguments are built from. Their params are ints, bools, None, dtypes and tuples
#: of ints only (the codec below), and their compiles are small.
TABLE = (
    "convert_element_type",
    "broadcast_in_dim",
    "iota",
    "reshape",
    "add",
    "sub",
    "mul",
    "div",
    "neg",
)
#: the dtypes an argument or a param may name
DTYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
    | {"float16", "bfloat16", "float32", "float64", "complex64", "complex128"}
)
MAX_RANK = 8
MAX_DIM = 1 << 31
MAX_ARGS = 4
MAX_DESCRIPTION = 4096
#: an entry larger than this is not shared (these are a few KB)
MAX_ENTRY = 128 << 10
#: descriptions one set-up reports at most, and their bytes (a pipe takes 64 KiB at once)
MAX_REPORTED = 32
REPORT_BYTES = 60 << 10
_KEY = re.compile(r"jit_[a-z_]{1,40}-[0-9a-f]{64}")


class Unshareable(ValueError):
    """A description the codec does not carry (or bytes that are not one)."""


# --- the codec (both ends) ------------------------------------------------------------
def encode_param(value: Any) -> Any:
    import numpy as np

    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, tuple) and all(
        isinstance(v, int | np.integer) and not isinstance(v, bool) for v in value
    ):
        return {"t": [int(v) for v in value]}
    if isinstance(value, np.dtype) and value.name in DTYPES:
        return {"d": value.name}
    raise Unshareable(f"a param of type {type(value).__name__}")


def decode_param(value: Any) -> Any:
    import jax.numpy as jnp

    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -MAX_DIM <= value <= MAX_DIM:
            raise Unshareable("an int param out of range")
        return value
    if isinstance(value, dict) and set(value) == {"t"} and isinstance(value["t"], list):
        items = value["t"]
        if len(items) > MAX_RANK or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_DIM for v in items
        ):
            raise Unshareable("a tuple param out of range")
        return tuple(items)
    if isinstance(value, dict) and set(value) == {"d"} and value["d"] in DTYPES:
        return jnp.dtype(value["d"])
    raise Unshareable("not a param the codec carries")


@dataclass(frozen=True)
class Aval:
    shape: tuple[int, ...]
    dtype: str
    weak_type: bool

    def encode(self) -> list[Any]:
        return [list(self.shape), self.dtype, self.weak_type]

    @classmethod
    def decode(cls, raw: Any) -> Aval:
        if not (isinstance(raw, list) and len(raw) == 3):
            raise Unshareable("not an argument type")
        shape, dtype, weak = raw
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_RANK
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape)
            or not all(0 <= d <= MAX_DIM for d in shape)
            or dtype not in DTYPES
            or not isinstance(weak, bool)
        ):
            raise Unshareable("an argument type out of range")
        return cls(tuple(shape), dtype, weak)

    @classmethod
    def of(cls, value: Any) -> Aval:
        """The type JAX gives ``value`` (a Python scalar's is weak), if a plain array's."""
        from jax._src import core

        typeof = getattr(core, "typeof", None) or core.get_aval  # type: ignore[attr-defined]
        try:
            aval = typeof(value)
        except TypeError as exc:
            raise Unshareable("an argument JAX gives no type") from exc
        shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
        if type(aval).__name__ != "ShapedArray" or shape is None or dtype is None:
            raise Unshareable("an argument that is no plain array")
        if getattr(dtype, "name", None) not in DTYPES:
            raise Unshareable("an argument of a dtype not shared")
        return cls(tuple(int(d) for d in shape), dtype.name, bool(aval.weak_type))


@dataclass(frozen=True)
class Description:
    """One eager compile that missed: the key JAX computed (the run's word only) and
    what the compiler needs to compile the same program itself."""

    key: str
    prim: str
    params: dict[str, Any]  # encoded
    avals: tuple[Aval, ...]

    def to_bytes(self) -> bytes:
        raw = {
            "key": self.key,
            "prim": self.prim,
            "params": self.params,
            "avals": [a.encode() for a in self.avals],
        }
        data = json.dumps(raw, separators=(",", ":")).encode()
        if len(data) > MAX_DESCRIPTION:
            raise Unshareable("a description too long")
        return data

    @classmethod
    def parse(cls, data: bytes) -> Description:
        """A description a run wrote, checked field by field (the run may be anyone's)."""
        if len(data) > MAX_DESCRIPTION:
            raise Unshareable("a description too long")
        try:
            raw = json.loads(data)
        except ValueError as exc:
            raise Unshareable("not JSON") from exc
        if not isinstance(raw, dict) or set(raw) != {"key", "prim", "params", "avals"}:
            raise Unshareable("not a description")
        key, prim, params, avals = (raw[k] for k in ("key", "prim", "params", "avals"))
        if prim not in TABLE or not isinstance(key, str) or _KEY.fullmatch(key) is None:
            raise Unshareable("a primitive or key that is not shared")
        if not key.startswith(f"jit_{prim}-"):
            raise Unshareable("a key of another primitive")
        if not isinstance(params, dict) or len(params) > 8:
            raise Unshareable("bad params")
        if not all(isinstance(k, str) and k.isidentifier() for k in params):
            raise Unshareable("bad param names")
        for value in params.values():
            decode_param(value)  # each one checked now, decoded again when compiled
        if not isinstance(avals, list) or len(avals) > MAX_ARGS:
            raise Unshareable("bad arguments")
        return cls(key, prim, params, tuple(Aval.decode(a) for a in avals))


# --- the run's end -------------------------------------------------------------------
class _State(threading.local):
    active = False
    described: tuple[str, dict[str, Any], tuple[Aval, ...]] | None = None


class _Link:
    """This process's pipe to its zygote and what it recorded. Its state is an
    instance's attributes: a kept process's check (sandbox/zygote/watch.py) compares
    modules' attributes by identity, and recording must not look like a change."""

    def __init__(self) -> None:
        self.fd: int | None = None
        #: key -> the description's line, of the compiles that missed in this set-up
        self.missed: dict[str, bytes] = {}


_state = _State()
link = _Link()


def connect(fd: int) -> bool:
    """This process (and each child it forks) records its set-ups' misses for the
    zygote's pipe ``fd``; False (and nothing installed) where this JAX lacks either
    hook."""
    if not _install():
        return False
    link.fd = fd
    return True


@contextlib.contextmanager
def sharing() -> Iterator[None]:
    """A run's set-up (its module, its arguments): its eager misses are recorded."""
    before = _state.active
    _state.active = True
    try:
        yield
    finally:
        _state.active = before


def report() -> int:
    """After a run's set-up: what it recorded, written to the zygote's pipe (as much
    as the pipe takes at once; the rest is dropped). Returns how many."""
    missed = list(link.missed.values())[:MAX_REPORTED]
    link.missed.clear()
    if link.fd is None or not missed:
        return 0
    data = b""
    for line in missed:  # whole lines only
        if len(data) + len(line) > REPORT_BYTES:
            break
        data += line
    with contextlib.suppress(OSError):  # full (the zygote made it non-blocking): dropped
        os.write(link.fd, data)
    return len(missed)


def _install() -> bool:
    try:
        from jax._src import compilation_cache
        from jax._src.lax import lax as lax_internal
    except ImportError:
        return False
    if getattr(compilation_cache, "_jaxplay_shared", False):
        return True
    get_cache = getattr(compilation_cache, "_get_cache", None)
    if get_cache is None:
        return False
    prims = {}
    for name in TABLE:
        prim = getattr(lax_internal, f"{name}_p", None)
        if prim is None or not callable(getattr(prim, "impl", None)):
            return False
        prims[name] = prim
    for name, prim in prims.items():
        prim.impl = _describing(name, prim.impl)

    def recording_get_cache(backend: Any) -> Any:
        cache = get_cache(backend)
        return None if cache is None else _RecordingCache(cache)

    compilation_cache._get_cache = recording_get_cache
    setattr(compilation_cache, "_jaxplay_shared", True)  # noqa: B010 (JAX's module)
    return True


def _describing(name: str, impl: Any) -> Any:
    def described(*args: Any, **params: Any) -> Any:
        if not _state.active or link.fd is None:
            return impl(*args, **params)
        try:
            description = (name, params, tuple(Aval.of(a) for a in args))
        except Unshareable:
            description = None
        outer, _state.described = _state.described, description
        try:
            return impl(*args, **params)
        finally:
            _state.described = outer

    described.__wrapped__ = impl  # type: ignore[attr-defined]
    return described


class _RecordingCache:
    """JAX's cache of this process; a miss of the eager primitive being applied in a
    run's set-up is recorded with its description."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get(self, key: str) -> bytes | None:
        found: bytes | None = self._inner.get(key)
        if found is None and _state.active and _state.described is not None:
            _record(key, *_state.described)
        return found


def _record(key: str, name: str, params: dict[str, Any], avals: tuple[Aval, ...]) -> None:
    if not key.startswith(f"jit_{name}-") or len(link.missed) >= MAX_REPORTED:
        return
    try:
        encoded = {k: encode_param(v) for k, v in params.items()}
        line = Description(key, name, encoded, avals).to_bytes() + b"\n"
    except Unshareable:  # a param the codec does not carry, or too long
        return
    link.missed[key] = line
