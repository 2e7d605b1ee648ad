"""The identity comparison of a kept process's check (sandbox/zygote/watch.py): the C
extension sandbox/zygote/_identity.c and the same comparison in Python find the same
changes, by identity only (a replacement that compares equal is a change), without
running any code of the objects they compare; the extension is built (in CI a
missing build fails) and loads in every interpreter jaxplay runs."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sandbox.environments.versions import installed
from sandbox.zygote import watch as state_watch

ROOT = Path(__file__).resolve().parents[2]
VERSIONS_DIR = Path(os.environ.get("JAXPLAY_JAX_VERSIONS_DIR") or ROOT / ".jaxplay" / "versions")
NOT_BUILT = "sandbox/zygote/_identity.abi3.so is not built (make setup, with a C compiler)"


class Implementation:
    """One way to take a baseline entry (state_watch._Namespace's) and to compare entries."""

    def __init__(self, native: bool) -> None:
        if native and state_watch._identity is None:
            pytest.skip(NOT_BUILT)
        self.native = native

    def entry(self, obj: Any) -> state_watch.Entry:
        if self.native:
            assert state_watch._identity is not None
            d = state_watch._identity.namespace(obj)
            assert type(d) is dict
        else:
            d = vars(obj)
        return (obj, type(obj), d, tuple(d), tuple(d.values()))

    def differing(self, entries: list[state_watch.Entry]) -> list[int]:
        if self.native:
            assert state_watch._identity is not None
            return state_watch._identity.differing(state_watch._identity.pack(entries))
        return state_watch._differing(entries)


@pytest.fixture(params=["c", "python"])
def impl(request: pytest.FixtureRequest) -> Implementation:
    return Implementation(request.param == "c")


def test_the_extension_is_built() -> None:
    if state_watch.IDENTITY_CHECK != "c":
        if os.environ.get("CI"):
            pytest.fail(f"{NOT_BUILT}: CI must build it (pyproject.toml, ext-modules)")
        pytest.skip(NOT_BUILT)


def test_one_build_loads_in_every_interpreter() -> None:
    """The JAX versions' environments run other Pythons (3.11, 3.12) on this source tree."""
    if state_watch.IDENTITY_CHECK != "c":
        pytest.skip(NOT_BUILT)
    pythons = {sys.executable}
    for env in installed(VERSIONS_DIR).values():
        pythons.add(env.python)
    seen = {}
    for python in sorted(pythons):
        done = subprocess.run(
            [python, "-I", "-c", LOADS], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        assert done.returncode == 0, (python, done.stderr[-2000:])
        seen[done.stdout.split()[0]] = python
    print("loaded by Python", ", ".join(sorted(seen)))


LOADS = """
import sys
sys.path.insert(0, ".")
from sandbox.zygote import _identity, watch as state_watch
assert state_watch.IDENTITY_CHECK == "c" and _identity.__file__.endswith("_identity.abi3.so")
m, c = type(sys)("m"), type("C", (), {"x": 1})
m.x = 1
entries = [(o, type(o), _identity.namespace(o), tuple(vars(o)), tuple(vars(o).values()))
           for o in (m, c)]
baseline = _identity.pack(entries)
assert _identity.differing(baseline) == []
m.x = c.x = 2
assert _identity.differing(baseline) == [0, 1]
print("%d.%d" % sys.version_info[:2])
"""


class _AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


class _EqualStr(str):
    pass


def _module(**attrs: Any) -> types.ModuleType:
    m = types.ModuleType("watched")
    for name, value in attrs.items():
        setattr(m, name, value)
    return m


def _replace(name: str, new: Callable[[Any], Any]) -> Callable[[types.ModuleType], None]:
    return lambda m: setattr(m, name, new(getattr(m, name)))


def _reorder(m: types.ModuleType) -> None:
    value = m.a
    del m.a
    m.a = value  # the same object, now after b


def _swap_class(m: types.ModuleType) -> None:
    class Lying(types.ModuleType):  # could answer m.a with anything, dict untouched
        pass

    m.__class__ = Lying


def _swap_key(m: types.ModuleType) -> None:
    value = m.b
    del m.b
    m.__dict__[_EqualStr("b")] = value  # an equal name, the same value


CHANGES: dict[str, Callable[[types.ModuleType], None]] = {
    "replaced value": _replace("a", lambda v: [1]),
    "added": lambda m: setattr(m, "c", 3),
    "removed": lambda m: delattr(m, "b"),
    "reordered": _reorder,
    "replaced by an object equal to everything": _replace("a", lambda v: _AlwaysEqual()),
    "a str replaced by an equal str subclass": _replace("s", _EqualStr),
    "a str replaced by an equal copy": _replace("s", lambda v: "".join(list(v))),
    "a dtype replaced by an equal string": _replace("dtype", lambda v: "float32"),
    "the module's class": _swap_class,
    "a name replaced by an equal one": _swap_key,
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_is_found(impl: Implementation, change: str) -> None:
    m = _module(a=[1], b=2, s="a string of its own", dtype=np.dtype("float32"))
    assert m.dtype == "float32" and m.s == "".join(list(m.s))  # the equal replacements
    kept = _module(a=1)
    entries = [impl.entry(kept), impl.entry(m), impl.entry(kept)]
    assert impl.differing(entries) == []
    CHANGES[change](m)
    assert impl.differing(entries) == [1]


def test_a_class_attribute_is_compared_through_its_mappingproxy(impl: Implementation) -> None:
    class Watched:
        dtype = np.dtype("float32")

        def method(self) -> int:
            return 1

    entries = [impl.entry(Watched), impl.entry(int)]
    assert isinstance(vars(Watched), types.MappingProxyType)
    if impl.native:  # the class's own dict, which its mappingproxy shows
        assert entries[0][2] == dict(vars(Watched)) and entries[1][2] == dict(vars(int))
    assert impl.differing(entries) == []
    saved = Watched.dtype
    Watched.dtype = "float32"  # type: ignore[assignment]
    assert impl.differing(entries) == [0]
    Watched.dtype = saved
    assert impl.differing(entries) == []
    Watched.method = lambda self: 2  # type: ignore[method-assign]
    assert impl.differing(entries) == [0]


def test_a_changed_entry_of_another_kind_is_found(impl: Implementation) -> None:
    m = _module(a=1)
    _, kind, d, keys, values = entry = impl.entry(m)
    assert impl.differing([entry]) == []
    assert impl.differing([(m, types.ModuleType, d, keys, values), entry]) == []
    assert impl.differing([(m, type, d, keys, values), entry]) == [0]  # another type
    assert impl.differing([(m, kind, d, (*keys[:-1], "b"), values), entry]) == [0]
    if impl.native:  # a baseline the comparison could not read right is refused
        assert state_watch._identity is not None
        for bad in [(m, kind, d, keys, (*values, 2)), (m, kind, vars(int), keys, values)]:
            with pytest.raises(TypeError):
                state_watch._identity.pack([entry, bad])
    else:
        assert impl.differing([(m, kind, d, keys, (*values, 2)), entry]) == [0]


class _Recording:
    """An object whose every comparison, hash and conversion is recorded and raises."""

    calls: list[str] = []  # noqa: RUF012

    def __eq__(self, other: object) -> bool:
        self.calls.append("__eq__")
        raise AssertionError("__eq__ called")

    def __hash__(self) -> int:
        self.calls.append("__hash__")
        return 7

    def __len__(self) -> int:
        self.calls.append("__len__")
        raise AssertionError("__len__ called")

    def __iter__(self) -> Any:
        self.calls.append("__iter__")
        raise AssertionError("__iter__ called")


class _RecordingStr(str):
    def __eq__(self, other: object) -> bool:
        _Recording.calls.append("str __eq__")
        raise AssertionError("__eq__ called")

    def __hash__(self) -> int:
        _Recording.calls.append("str __hash__")
        return str.__hash__(self)


class _RecordingMeta(type):
    def __getattribute__(cls, name: str) -> Any:
        _Recording.calls.append(f"metaclass {name}")
        return type.__getattribute__(cls, name)


class _RecordingModule(types.ModuleType):
    def __getattribute__(self, name: str) -> Any:
        _Recording.calls.append(f"module {name}")
        return types.ModuleType.__getattribute__(self, name)


def test_the_c_comparison_runs_no_python_code() -> None:
    """Nothing of the compared objects runs (no __eq__, __hash__, __iter__, no
    __getattribute__ of a module or a metaclass), nor any other Python code: a
    profile function sees no Python call during the baseline's namespace() nor
    during differing()."""
    Implementation(native=True)  # skips where it is not built
    m = _module(a=_Recording(), b=1)
    m.__dict__[_RecordingStr("key")] = _Recording()
    cls = _RecordingMeta("Cls", (), {"attr": _Recording()})
    odd = _RecordingModule("odd")
    odd.x = _Recording()
    changed = _module(a=_Recording(), b=1)
    m_changed = _module(b=1, key=2)
    _Recording.calls.clear()
    events: list[tuple[str, str]] = []

    def profile(frame: types.FrameType, event: str, arg: Any) -> None:
        events.append(
            (event, frame.f_code.co_name if event == "call" else getattr(arg, "__name__", ""))
        )

    assert state_watch._identity is not None
    namespace, dicts = state_watch._identity.namespace, []
    sys.setprofile(profile)
    try:
        for x in (m, cls, odd, changed, m_changed):
            dicts.append(namespace(x))
    finally:
        sys.setprofile(None)
    entries = [
        (x, type(x), d, tuple(d), tuple(d.values()))
        for x, d in zip((m, cls, odd, changed, m_changed), dicts, strict=True)
    ]
    assert _Recording.calls == []
    assert [e for e in events if e[0] == "call"] == [], events
    assert ("c_call", "namespace") in events
    changed.a = _Recording()  # a value replaced by one that claims to be equal
    del m_changed.key
    m_changed.__dict__[_RecordingStr("key")] = 2  # an equal name, the same value
    cls.attr = _Recording()
    _Recording.calls.clear()
    events.clear()

    differing, baseline = state_watch._identity.differing, state_watch._identity.pack(entries)
    sys.setprofile(profile)
    try:
        found = differing(baseline)
    finally:
        sys.setprofile(None)
    assert found == [1, 3, 4]
    assert _Recording.calls == []
    assert [e for e in events if e[0] == "call"] == [], events
    assert ("c_call", "differing") in events


@pytest.mark.slow
def test_a_module_class_swap_is_a_change_of_the_watch() -> None:
    """A module's class replaced by a subclass (which could answer its attributes
    with anything, its dict untouched), and a reordering: changes, whichever
    implementation runs."""
    done = subprocess.run(
        [sys.executable, "-c", WATCH], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0 and "checked" in done.stdout, done.stderr[-3000:]


WATCH = """
import types
import jax, jax.numpy as jnp
from sandbox.zygote import watch as state_watch


class Lying(types.ModuleType):
    def __getattribute__(self, name):
        return (lambda *a, **k: 42) if name == "sum" else super().__getattribute__(name)


def main(native):
    jnp.sum(jnp.ones(3)).block_until_ready()  # the backend started before the baseline
    state_watch._identity = native
    watch = state_watch.Watch()
    assert watch.changes() == [], watch.changes()
    jnp.__class__ = Lying
    assert jnp.sum(jnp.ones(3)) == 42
    assert "the attributes of jax.numpy" in watch.changes(), watch.changes()
    jnp.__class__ = types.ModuleType
    assert watch.changes() == [], watch.changes()
    last = list(vars(jnp))[0]
    value = vars(jnp).pop(last)
    vars(jnp)[last] = value  # the same attribute, moved to the end
    assert "the attributes of jax.numpy" in watch.changes(), watch.changes()


native = state_watch._identity
main(None)
if native is not None:
    main(native)
print("checked")
"""


@pytest.mark.slow
def test_c_and_python_agree_on_a_jax_process() -> None:
    """In a real JAX process (its ~2,600 namespaces after a jit, a grad and a vmap),
    the two implementations find nothing, then the same changes."""
    if state_watch.IDENTITY_CHECK != "c":
        pytest.skip(NOT_BUILT)
    done = subprocess.run(
        [sys.executable, "-c", AGREE], capture_output=True, text=True, timeout=180, cwd=ROOT
    )
    assert done.returncode == 0 and "agree" in done.stdout, done.stderr[-3000:]


AGREE = """
import jax, jax.numpy as jnp, numpy as np
from jax._src import array
from sandbox.zygote import watch as state_watch


def main():  # its names are not __main__'s, which is watched too
    f = jax.jit(jax.grad(lambda x: jnp.sum(jnp.tanh(x) ** 2)))
    f(jnp.ones(3)).block_until_ready()
    jax.vmap(jnp.sin)(jnp.ones((2, 3))).block_until_ready()
    watch = state_watch.Watch()
    entries = [ns.entry for ns in watch.namespaces.values()]
    assert len(entries) > 1000 and watch._other == [], (len(entries), len(watch._other))
    # as the fallback takes them: vars(obj), a mappingproxy for a class
    py_entries = [(o, k, vars(o), keys, values) for o, k, _, keys, values in entries]
    assert sum(type(e[2]) is not dict for e in py_entries) > 500

    baseline = state_watch._identity.pack(entries)

    def both():
        c, py = state_watch._identity.differing(baseline), state_watch._differing(py_entries)
        assert c == py, (c, py)
        return sorted(watch._names[i] for i in c)

    assert both() == [], both()
    saved = jnp.sum, np.float32, array.ArrayImpl.__dict__["ndim"]
    jnp.sum = lambda *a, **k: 42
    np.float32 = np.dtype("float32")
    array.ArrayImpl.ndim = property(lambda self: 0)
    impl = f"class {array.ArrayImpl.__module__}.{array.ArrayImpl.__qualname__}"
    assert both() == sorted([impl, "jax.numpy", "numpy"]), both()
    jnp.sum, np.float32, array.ArrayImpl.ndim = saved
    assert both() == [], both()
    print("agree", len(entries), sum(len(e[2]) for e in entries))


main()
"""


def test_without_the_extension_the_same_check_runs_in_python_and_says_so() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FALLBACK], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0 and "checked" in done.stdout, done.stderr[-3000:]
    assert done.stderr.count("sandbox.zygote._identity is not built") == 1, done.stderr


FALLBACK = """
import sys
sys.modules["sandbox.zygote._identity"] = None  # as where it was not built: ImportError
import json
from sandbox.zygote import watch as state_watch


def main():
    assert state_watch.IDENTITY_CHECK == "python" and state_watch._identity is None
    watch = state_watch.Watch()
    assert watch.changes() == [], watch.changes()
    saved, json.dumps = json.dumps, lambda *a, **k: "{}"
    assert "the attributes of json" in watch.changes(), watch.changes()
    json.dumps = saved
    assert watch.changes() == [], watch.changes()
    print("checked")


main()
"""
