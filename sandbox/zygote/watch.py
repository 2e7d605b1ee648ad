"""A process kept across one tenant's runs, and the checks that let it be kept.

A zygote's warm child (child.py) that ran a run to a normal end may
serve the same tenant's next run instead of exiting: its JAX keeps its in-memory
caches, so eager operations, tracing and lowering cost what they cost in a warm
notebook. It is kept only while nothing jaxplay or the next run relies on has
changed. Two checks, each against a baseline taken before the process's first run
(before any user code ran in it):

- ``Watch`` (in the process itself, Python's state): ``sys.modules`` (names and
  identity), every attribute of every module by identity, for functions also
  ``__code__``, ``__defaults__`` and ``__kwdefaults__``, the attributes of every
  class a module defines, ``jax.config``'s values, JAX's trace state, Python
  threads, signal handlers, interval timers, ``os.environ``, cwd, umask,
  ``sys.path`` and the import machinery, ``sys``'s hooks (trace, profile,
  exception, display, unraisable, breakpoint, asyncgen, monitoring), JAX's rule
  tables (``RuleTables``: every module dict of ``jax`` keyed by primitives or named
  as one — JVP, transpose, linearization, batching, partial-eval, DCE and MLIR
  lowering rules, per platform too — by item identity, and every primitive's own
  attributes: ``impl``, ``abstract_eval``, a ``bind`` set on it), the recursion
  limit and switch interval, ``warnings.filters``, numpy's print and error options,
  ``gc``'s settings and callbacks, ``atexit``'s count. An audit hook installed with
  the baseline marks the process tainted on what changes state without changing any
  of that: a new audit hook, ``ctypes``, ``gc.get_objects``/``get_referrers``/
  ``get_referents``, ``sys.monitoring`` tools, and setting or deleting an attribute
  of a watched class or function;
- ``kernel_view`` (kernel_view.py: read by the zygote from ``/proc/PID``, outside the process's
  control): its threads, signal masks and dispositions, pending signals, umask,
  capabilities, seccomp filters, rlimits, nice and scheduling, cwd, open
  descriptors, POSIX timers, name, session.

Any difference, an error exit, a kill, RSS over the bound or the run count reached
retires the process; the tenant's next run gets a fresh fork. What the run itself
made and the engine owns (its module ``snippet``, its lines in ``linecache``, the
``sys.stdout``/``stderr``/``stdin`` it was given, the global random states of
``random`` and ``numpy.random``) is put back before the check, by ``Watch.reset``;
the engine seeds both generators from the OS at the start of every run anyway
(sandbox/engine/core/run.py ``fresh_randomness``), kept process or fresh fork alike.

What neither check can see: a change deep inside an object (an item of a dict or
list that some module holds, other than JAX's rule tables; an attribute of an
instance other than a primitive; a method of a class outside ``CLASS_FAMILIES``; the
code of a function no module or class holds, such as the lambda inside a rule's
``partial`` (tests/server/test_hostile_pristine.py rewrites tanh's that way); the
check's own objects), which only a deliberate run makes. Such a run can change what
its own tenant's later runs show, until the process retires; it never reaches
another tenant (a jail, its zygote and its processes serve one tenant for life), and
code that is not the tenant's own (a shared link's, an embed's) never runs in a
process kept for anyone (sandbox/protocol/tenants.py, issue 33).

**This check is a consistency aid for the tenant's own runs, not a security
boundary.** Code in the process can always undo or deceive a check made in that
process. What crosses tenants (the result cache's answers, shared links, embeds) is
decided by pristine runs alone: a fresh child of a zygote that never ran anyone's
code, in a jail that never served a tenant, retired afterwards (pool.py;
docs/server.md, the trust model).
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import gc
import linecache
import logging
import operator
import os
import random
import signal
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from sandbox.environments import libraries

try:  # built by the install (pyproject.toml, ext-modules); see IDENTITY_CHECK
    from sandbox.zygote import _identity
except ImportError as exc:
    _identity = None  # type: ignore[assignment]
    _IDENTITY_MISSING = f"{type(exc).__name__}: {exc}"

#: Which implementation compares the namespaces of modules and classes after each
#: run: "c" (sandbox/zygote/_identity.c, ~1 ms a run in a JAX process) or "python"
#: (the same comparison, where the extension was not built: ~5-10 ms a run).
IDENTITY_CHECK = "c" if _identity is not None else "python"
if _identity is None:
    logging.getLogger(__name__).warning(
        "sandbox.zygote._identity is not built (%s): a kept process checks its namespaces"
        " in Python, ~5-10 ms a run more (reinstall jaxplay with a C compiler:"
        " make setup)",
        _IDENTITY_MISSING,
    )

#: The engine's own module and file names (sandbox/engine/core/program.py, protocol.py):
#: made by every run, put back by ``reset``.
RUN_MODULE = "snippet"
RUN_FILES = ("<snippet>", "<args>")

#: Audit events after which the process is not kept (see the module's docstring).
_TAINTING = frozenset(
    {
        "sys.addaudithook",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.monitoring.register_callback",
    }
)
#: Packages whose classes' attributes are compared too (those of every other module
#: are not: ~10 ms more per run for the whole process), the libraries the zygote
#: imports (sandbox/environments/libraries.py) among them.
CLASS_FAMILIES = (
    frozenset({"jax", "jaxlib", "numpy", "ml_dtypes", "opt_einsum", "builtins", "sys", "sandbox"})
    | libraries.PACKAGES
)
_ATTRIBUTE_EVENTS = frozenset({"object.__setattr__", "object.__delattr__"})

Entry = tuple[Any, type, Any, tuple[Any, ...], tuple[Any, ...]]


class _Namespace:
    """The attributes of a module or a class (``vars(obj)``) watched by identity: the
    object's exact type, its attribute names in order and their values (kept alive,
    so that no other object can take their ids).

    A module's or a class's attributes live in one dict for its whole life (neither
    can be given another), so it is found once, here: by ``_identity.namespace``
    (the class's own dict, not its mappingproxy; no code of the object runs), or in
    Python ``vars(obj)`` (for a class, a mappingproxy: a live view of that dict).
    Anything else ``sys.modules`` holds may get another ``__dict__``: ``vars(obj)``
    is read again each time (``None`` in the entry)."""

    __slots__ = ("entry", "keys", "obj", "values")

    def __init__(self, obj: Any) -> None:
        kind = type(obj)
        own = issubclass(kind, types.ModuleType | type)
        d = None
        if own and _identity is not None:
            try:
                d = _identity.namespace(obj)
            except TypeError:  # a class it cannot take (ctypes' on Python 3.11): re-read
                own = False
        if d is None:
            d = vars(obj)
        self.obj = obj
        self.keys = tuple(d)
        self.values = tuple(d.values())
        #: what the comparison takes (``_identity.differing``, ``_differing``)
        self.entry: Entry = (obj, kind, d if own else None, self.keys, self.values)

    def attributes(self) -> Any:
        """Its attributes now (no code of a module or a class runs)."""
        return vars(self.obj) if self.entry[2] is None else self.entry[2]


def _same(d: Any, keys: tuple[Any, ...], values: tuple[Any, ...]) -> bool:
    """Whether mapping ``d`` holds exactly ``keys`` and ``values``, in that order, by
    identity (no ``__eq__`` of anything is called)."""
    return (
        len(d) == len(keys) == len(values)
        and all(map(operator.is_, d, keys))
        and all(map(operator.is_, d.values(), values))
    )


def _differing(entries: list[Entry]) -> list[int]:
    """The indices of the ``(obj, type, attributes, keys, values)`` entries whose
    object is no longer of that exact type or whose attributes (``vars(obj)`` where
    None) differ (``_same``): what ``_identity.differing`` computes in C, in Python."""
    return [
        i
        for i, (obj, kind, d, keys, values) in enumerate(entries)
        if type(obj) is not kind or not _same(vars(obj) if d is None else d, keys, values)
    ]


def _function(value: Any) -> types.FunctionType | None:
    if isinstance(value, staticmethod | classmethod):
        value = value.__func__
    return value if isinstance(value, types.FunctionType) else None


#: Module attributes of these packages that are JAX's rule tables by their name,
#: watched even while empty (a table keyed by primitives is watched whatever its name)
RULE_TABLE_PACKAGES = frozenset({"jax"})  # jaxlib holds none: half the scan for nothing
_RULE_TABLE_SUFFIXES = ("rules", "jvps", "transposes", "batchers", "lowerings", "linearizations")


class RuleTables:
    """JAX's rule tables and primitives, by identity (issue 33): a run that replaces
    ``ad.primitive_jvps[tanh_p]`` or a lowering in ``mlir._lowerings`` changes what
    every later ``grad`` or compile of that primitive shows, without changing any
    module's attributes. Found once per baseline by walking the modules of
    ``RULE_TABLE_PACKAGES``: every ``dict`` attribute whose keys include primitives or
    whose name ends as a rule table's does (``_RULE_TABLE_SUFFIXES``); per-platform
    tables (a dict of such dicts, ``mlir._platform_specific_lowerings``) with their
    inner tables; and every primitive that is a key of a table or an attribute of a
    module, by its instance dict (and that dict's own identity). Compared like the
    namespaces: keys and values in order, by identity, no code of theirs run (in C
    where every mapping is an exact dict)."""

    def __init__(
        self, modules: dict[str, Any], candidates: dict[str, list[tuple[Any, Any]] | None]
    ) -> None:
        """``candidates``: by module, what ``rule_candidates`` found in its namespace
        (the walk's, kept up to date with it: ``ModuleWalk.candidates``); a module
        without them is read here."""
        core = modules.get("jax._src.core")
        primitive = getattr(core, "Primitive", None)
        self.names: list[str] = []
        entries: list[Entry] = []
        self.primitives: list[tuple[Any, Any]] = []  # (primitive, its __dict__)
        if not isinstance(primitive, type):
            self._pack(entries)
            return
        seen: set[int] = set()
        prims: dict[int, Any] = {}

        def table(name: str, d: dict[Any, Any]) -> None:
            if id(d) in seen:
                return
            seen.add(id(d))
            self.names.append(name)
            entries.append((d, type(d), d, tuple(d), tuple(d.values())))
            for key in list(d):
                if isinstance(key, primitive):
                    prims.setdefault(id(key), key)

        for name, module in list(modules.items()):
            if name.partition(".")[0] not in RULE_TABLE_PACKAGES:
                continue
            found = candidates.get(name)
            if found is None:
                ns = getattr(module, "__dict__", None)
                if not isinstance(ns, dict):
                    continue
                found = rule_candidates(ns, primitive)
            for attr, value in found:
                if isinstance(value, primitive):
                    prims.setdefault(id(value), value)
                if not isinstance(value, dict) or not isinstance(attr, str):
                    continue
                inner = [v for v in list(value.values())[:16] if isinstance(v, dict)]
                named = attr.endswith(_RULE_TABLE_SUFFIXES)
                if inner and len(inner) == min(len(value), 16):
                    # per platform (a dict of tables): the outer table and each inner
                    if named or any(_keyed_by(v, primitive) for v in inner):
                        table(f"{name}.{attr}", value)
                        for key, v in list(value.items()):
                            if isinstance(v, dict):
                                table(f"{name}.{attr}[{key!r}]", v)
                elif named or _keyed_by(value, primitive):
                    table(f"{name}.{attr}", value)
        for prim in prims.values():
            d = getattr(prim, "__dict__", None)
            if type(d) is dict:
                self.names.append(f"primitive {getattr(prim, 'name', '?')!s:.60}")
                entries.append((prim, type(prim), d, tuple(d), tuple(d.values())))
                self.primitives.append((prim, d))
        self._pack(entries)

    def _pack(self, entries: list[Entry]) -> None:
        self.entries = entries
        native = _identity is not None
        self._native_at = [i for i, e in enumerate(entries) if native and type(e[2]) is dict]
        self._native = _identity.pack([entries[i] for i in self._native_at]) if native else None
        taken = set(self._native_at)
        self._other_at = [i for i in range(len(entries)) if i not in taken]
        self._other = [entries[i] for i in self._other_at]

    def changed(self, runtime: tuple[str, ...] | None = None) -> list[str]:
        """The tables and primitives that differ from the baseline, in words.
        ``runtime`` (the run imported new modules from the runtime, which may register
        rules for their primitives as they load): a table that only gained entries
        after its baseline ones, each a rule whose code is the runtime's, is not a
        change (the caller takes a new baseline)."""
        at = [self._other_at[i] for i in _differing(self._other)]
        if _identity is not None and self._native is not None:
            at += [self._native_at[i] for i in _identity.differing(self._native)]
        found = [
            f"JAX's {self.names[i]}"
            for i in sorted(at)
            if runtime is None or not _only_rules_added(self.entries[i], runtime)
        ]
        # a primitive given another __dict__ altogether (the entries hold the old one)
        found += [
            f"JAX's primitive {getattr(p, 'name', '?')!s:.60} (its __dict__)"
            for p, d in self.primitives
            if _instance_dict(p) is not d
        ]
        return found


def _only_rules_added(entry: Entry, runtime: tuple[str, ...]) -> bool:
    """Whether a table kept its baseline entries, in order and by identity, and only
    gained entries whose rules are the runtime's code (a plain function, a partial of
    one, or a per-platform table of such)."""
    obj, kind, d, keys, values = entry
    if type(obj) is not kind or not isinstance(d, dict) or kind is not type(d):
        return False
    now_keys, now_values, n = list(d), list(d.values()), len(keys)
    return (
        len(now_keys) > n
        and all(map(operator.is_, now_keys[:n], keys))
        and all(map(operator.is_, now_values[:n], values))
        and all(_runtime_rule(v, runtime) for v in now_values[n:])
    )


def _runtime_rule(rule: Any, runtime: tuple[str, ...], depth: int = 0) -> bool:
    if depth > 2:
        return False
    if isinstance(rule, dict):
        return all(_runtime_rule(v, runtime, depth + 1) for v in list(rule.values()))
    if isinstance(rule, functools.partial):
        return _runtime_rule(rule.func, runtime, depth + 1)
    kind = type(rule)
    if dataclasses.is_dataclass(rule) and kind.__module__.partition(".")[0] in RULE_TABLE_PACKAGES:
        # JAX's own holder of a rule (mlir.LoweringRuleEntry): its callables are rules
        fields = [getattr(rule, f.name, None) for f in dataclasses.fields(rule)]
        rules = [f for f in fields if callable(f)]
        return bool(rules) and all(_runtime_rule(f, runtime, depth + 1) for f in rules)
    code = getattr(_function(rule), "__code__", None)
    return code is not None and os.path.realpath(code.co_filename).startswith(runtime)


def rule_candidates(ns: dict[Any, Any], primitive: type) -> list[tuple[Any, Any]]:
    """What of a module's namespace ``RuleTables`` looks at, in order: its primitives
    and its dicts under a name (a rule table is one by its contents or its name)."""
    return [
        (attr, value)
        for attr, value in list(ns.items())
        if isinstance(value, primitive) or (isinstance(value, dict) and isinstance(attr, str))
    ]


def _primitive_type() -> type | None:
    kind = getattr(sys.modules.get("jax._src.core"), "Primitive", None)
    return kind if isinstance(kind, type) else None


def _keyed_by(d: dict[Any, Any], kind: type) -> bool:
    """Whether any of ``d``'s first keys is a ``kind`` (no code of a key runs)."""
    return any(isinstance(k, kind) for k in list(d)[:16])


def _instance_dict(obj: Any) -> Any:
    """``obj.__dict__`` without running a ``__getattribute__`` of its class."""
    try:
        return object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None


class ModuleWalk:
    """Every module of ``sys.modules`` by name, its namespace and those of the classes
    of CLASS_FAMILIES it defines, and the functions they hold: the part of a baseline
    that walks ~120,000 attributes (~0.1 s in a JAX process). A zygote walks once,
    before it forks (``prebuild``); each warm child brings that walk up to date as it
    takes its baseline (``brought_up_to_date``: what changed since, found by
    identity, as the check after a run finds it), which makes it what a new walk
    would make."""

    def __init__(self) -> None:
        self.modules: dict[str, Any] = {}
        self.namespaces: dict[str, _Namespace] = {}
        self.guarded: dict[int, Any] = {}
        #: the class namespaces each module's walk added, by module
        self.classes: dict[str, list[str]] = {}
        #: what RuleTables reads of each module of RULE_TABLE_PACKAGES (``rule_candidates``,
        #: None where JAX's Primitive was not there to tell), found as it is walked: a
        #: module whose namespace has not changed since holds the same objects
        self.candidates: dict[str, list[tuple[Any, Any]] | None] = {}

    @classmethod
    def of_sys_modules(cls) -> ModuleWalk:
        walk = cls()
        for name, module in list(sys.modules.items()):
            walk.add(name, module)
        return walk

    def add(self, name: str, module: Any) -> None:
        self.modules[name] = module
        d = getattr(module, "__dict__", None)
        if not isinstance(d, dict):
            return
        self.namespaces[name] = _Namespace(module)
        if name.partition(".")[0] in RULE_TABLE_PACKAGES:
            primitive = _primitive_type()
            self.candidates[name] = rule_candidates(d, primitive) if primitive else None
        watched = name.partition(".")[0] in CLASS_FAMILIES
        classes = self.classes.setdefault(name, [])
        for value in list(d.values()):
            if isinstance(value, type) and value.__module__ == name and watched:
                key = f"class {name}.{value.__qualname__}"
                self.namespaces[key] = _Namespace(value)
                classes.append(key)
                self._guard_class(value)
            elif (fn := _function(value)) is not None:
                self.guarded[id(fn)] = fn

    def _guard_class(self, cls: type) -> None:
        self.guarded[id(cls)] = cls
        for v in list(vars(cls).values()):
            if (f := _function(v)) is not None:
                self.guarded[id(f)] = f

    def _drop(self, name: str) -> None:
        self.modules.pop(name, None)
        self.namespaces.pop(name, None)
        self.candidates.pop(name, None)
        for key in self.classes.pop(name, []):
            self.namespaces.pop(key, None)

    def brought_up_to_date(self) -> ModuleWalk:
        """This walk made what ``of_sys_modules`` would make now: modules gone or
        replaced dropped, each module or class whose attributes changed (or whose
        object changed type) walked again, new modules added. Functions guarded before
        stay guarded (kept alive, their ids stay theirs)."""
        now = dict(sys.modules)
        for name in [n for n, m in self.modules.items() if now.get(n) is not m]:
            self._drop(name)
        names = list(self.namespaces)
        for i in _changed([self.namespaces[n].entry for n in names]):
            name = names[i]
            if name not in self.namespaces:  # its module's walk again took it
                continue
            if name in self.modules:
                module = self.modules[name]
                self._drop(name)
                self.add(name, module)
            else:  # a class: its own namespace and functions
                cls = self.namespaces[name].obj
                self.namespaces[name] = _Namespace(cls)
                self._guard_class(cls)
        for name, module in now.items():
            if name not in self.modules:
                self.add(name, module)
        return self


_PREBUILT: list[ModuleWalk] = []


def prebuild() -> None:
    """Walk the modules now, once, for every warm child this process forks later
    (a zygote, or the jail template its zygotes are forked from: main.py's
    ``boot``). Its children bring the walk up to date as they take their baseline.
    A walk that fails leaves none: each child's ``Watch`` walks anew, and says why it
    cannot where a warm child's warm-up reports it (its process then serves one run)."""
    try:
        _PREBUILT[:] = [ModuleWalk.of_sys_modules()]
    except Exception:
        _PREBUILT.clear()


def _changed(entries: list[Entry]) -> list[int]:
    """The indices of ``entries`` that differ (``_differing``: in C where their
    attributes are an exact dict)."""
    if _identity is None:
        return _differing(entries)
    native = [i for i, e in enumerate(entries) if e[2] is not None]
    other = [i for i, e in enumerate(entries) if e[2] is None]
    at = [native[i] for i in _identity.differing(_identity.pack([entries[i] for i in native]))]
    at += [other[i] for i in _differing([entries[i] for i in other])]
    return sorted(at)


class Watch:
    """The baseline of a process's Python state, taken before its first run.

    Modules' attributes, and those of the classes of the packages in
    CLASS_FAMILIES, are compared by identity. The code and defaults of functions
    (every function a module or such a class holds) are guarded by the audit hook
    instead, which sees every write to them (``object.__setattr__`` on a function's
    ``__code__``, ``__defaults__``, ``__kwdefaults__``): comparing the ~15,000
    functions of a JAX process after each run would cost ~45 ms.

    A module that a run imports for the first time (JAX imports some on first use,
    the engine its timing, a user ``scipy``) is adopted into the baseline when it
    was loaded from the runtime (the interpreter's or jaxplay's read-only files) and
    holds nothing that the run's code made; otherwise the process is not kept.
    """

    def __init__(self) -> None:
        self.tainted: str | None = None
        sys.modules.pop(RUN_MODULE, None)  # a warm-up's, not part of the baseline
        for filename in RUN_FILES:
            linecache.cache.pop(filename, None)
        self.runtime = _runtime_dirs()
        # the zygote's walk (``prebuild``), brought up to date, or a new one
        walk = _PREBUILT.pop().brought_up_to_date() if _PREBUILT else ModuleWalk.of_sys_modules()
        self.modules = walk.modules
        self.namespaces = walk.namespaces
        self._walk = walk
        self._guarded = walk.guarded  # kept alive: their ids stay theirs
        self._ids = frozenset(self._guarded)
        self._index()
        self.rules = RuleTables(self.modules, walk.candidates)
        self.values = _values()
        self.streams = (sys.stdout, sys.stderr, sys.stdin)
        self.random_states = _random_states()
        sys.addaudithook(self._audit)

    def _add(self, name: str, module: Any) -> None:
        self._walk.add(name, module)

    def _index(self) -> None:
        """The namespaces as the comparison takes them, once per baseline: modules
        and classes (all of them, in a JAX process) for ``_identity.differing``;
        any other object that ``sys.modules`` holds for ``_differing``; and
        ``sys.modules``'s own names and modules."""
        self.module_names = (tuple(sys.modules), tuple(sys.modules.values()))
        self._names = list(self.namespaces)
        entries = [ns.entry for ns in self.namespaces.values()]
        native = _identity is not None
        self._native_at = [i for i, e in enumerate(entries) if native and e[2] is not None]
        self._native = _identity.pack([entries[i] for i in self._native_at]) if native else None
        # sys.modules's names and modules, packed alike (the dict is the entry's object)
        self._sys_modules = sys.modules
        modules = (sys.modules, dict, sys.modules, *self.module_names)
        self._modules = _identity.pack([modules]) if native and type(sys.modules) is dict else None
        taken = set(self._native_at)
        self._other_at = [i for i in range(len(entries)) if i not in taken]
        self._other = [entries[i] for i in self._other_at]

    def _changed_namespaces(self) -> list[str]:
        """The names of the namespaces that differ from the baseline, in its order."""
        at = [self._other_at[i] for i in _differing(self._other)]
        if _identity is not None and self._native is not None:
            at += [self._native_at[i] for i in _identity.differing(self._native)]
        return [self._names[i] for i in sorted(at)]

    def _same_modules(self) -> bool:
        """Whether ``sys.modules`` holds exactly the baseline's names and modules."""
        if _identity is None or self._modules is None:
            return _same(sys.modules, *self.module_names)
        return sys.modules is self._sys_modules and _identity.differing(self._modules) == []

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.tainted is not None:
            return
        if event in _TAINTING or event.startswith("ctypes."):
            self.tainted = event
        elif event in _ATTRIBUTE_EVENTS and args and id(args[0]) in self._ids:
            self.tainted = f"{event} {args[1] if len(args) > 1 else ''}"

    def reset(self) -> None:
        """Put back what the engine gives every run (after the run, before ``changes``)."""
        sys.stdout, sys.stderr, sys.stdin = self.streams
        sys.modules.pop(RUN_MODULE, None)
        for filename in RUN_FILES:
            linecache.cache.pop(filename, None)
        _set_random_states(self.random_states)

    def changes(self) -> list[str]:
        """What differs from the baseline, in words (empty: nothing seen). New
        modules that may be adopted are, when nothing else changed."""
        found: list[str] = []
        if self.tainted is not None:
            found.append(f"audit event {self.tainted}")
        added: dict[str, Any] = {}
        if not self._same_modules():
            now = dict(sys.modules)
            gone = sorted(n for n, m in self.modules.items() if now.get(n) is not m)
            if gone:
                found.append(f"sys.modules: {gone[:5]} gone or replaced")
            added = {n: m for n, m in now.items() if n not in self.modules}
            foreign = [n for n, m in added.items() if not self._adoptable(m)]
            if foreign:
                found.append(f"sys.modules: {foreign[:5]} not from the runtime")
        refreshed: list[str] = []
        for name in self._changed_namespaces():
            ns = self.namespaces[name]
            if type(ns.obj) is ns.entry[1] and _only_submodules_added(
                name, ns, ns.attributes(), added
            ):
                refreshed.append(name)
                continue
            found.append(f"the attributes of {name}")
            if len(found) > 8:
                return found
        adopting = bool(added) and not any("not from the runtime" in f for f in found)
        found.extend(self.rules.changed(self.runtime if adopting else None)[:8])
        now_values = _values()
        found.extend(k for k in self.values if self.values[k] != now_values.get(k))
        if not found and added:
            for name in refreshed:
                self.namespaces[name] = _Namespace(self.namespaces[name].obj)
            for name, module in added.items():
                self._add(name, module)
            self._ids = frozenset(self._guarded)
            self._index()
            self.rules = RuleTables(self.modules, self._walk.candidates)  # the new modules' too
        return found

    def _adoptable(self, module: Any) -> bool:
        """Loaded from the runtime's files and holding no function of the run's code."""
        spec = getattr(module, "__spec__", None)
        if spec is None or not isinstance(module, types.ModuleType):
            return False
        places = [spec.origin] if spec.origin not in (None, "namespace") else []
        places += list(spec.submodule_search_locations or [])
        if spec.origin in ("built-in", "frozen"):
            places = []
        elif not places or not all(
            isinstance(p, str) and os.path.realpath(p).startswith(self.runtime) for p in places
        ):
            return False
        for value in list(vars(module).values()):
            code = getattr(_function(value), "__code__", None)
            if code is not None and not os.path.realpath(code.co_filename).startswith(self.runtime):
                return False
        return True


def _runtime_dirs() -> tuple[str, ...]:
    """Where the interpreter, its packages and jaxplay's own code live (read-only in
    a jail), each ending with a separator."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.join(here, "sandbox")}
    dirs |= {p for p in sys.path if p and "site-packages" in p}
    return tuple(sorted({os.path.join(os.path.realpath(d), "") for d in dirs}))


def _only_submodules_added(name: str, before: _Namespace, d: Any, added: dict[str, Any]) -> bool:
    """Whether a package's attributes changed only by new submodules (an import of
    ``package.sub`` sets ``package.sub``, after every attribute it had): its
    baseline, by identity and in order, then only modules the run imported, each
    under its own name (an exact ``str``: no code of a key runs)."""
    keys, values, n = tuple(d), tuple(d.values()), len(before.keys)
    return (
        len(keys) > n
        and all(map(operator.is_, keys[:n], before.keys))
        and all(map(operator.is_, values[:n], before.values))
        and all(
            type(k) is str and added.get(f"{name}.{k}") is v
            for k, v in zip(keys[n:], values[n:], strict=True)
        )
    )


def _safe(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception as exc:  # a changed value that cannot be read is a change
        return f"unreadable: {type(exc).__name__}"


def _values() -> dict[str, Any]:
    """Settings held by value (compared with ==, on copies taken by us)."""
    values: dict[str, Any] = {
        "threads": tuple(threading.enumerate()),
        "python threads": len(sys._current_frames()),  # _thread's too
        "signal handlers": tuple(
            _safe(functools.partial(signal.getsignal, s)) for s in sorted(signal.valid_signals())
        ),
        "interval timers": tuple(
            signal.getitimer(t)
            for t in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)
        ),
        "os.environ": dict(os.environ),
        "cwd": _safe(os.getcwd),
        "umask": _umask(),
        "sys.path": list(sys.path),
        "sys.meta_path": list(sys.meta_path),
        "sys.path_hooks": list(sys.path_hooks),
        "sys hooks": (
            sys.gettrace(),
            sys.getprofile(),
            threading.gettrace(),
            threading.getprofile(),
            sys.excepthook,
            sys.displayhook,
            sys.unraisablehook,
            sys.breakpointhook,
            threading.excepthook,
            tuple(sys.get_asyncgen_hooks()),
            sys.get_coroutine_origin_tracking_depth(),
        ),
        "sys limits": (
            sys.getrecursionlimit(),
            sys.getswitchinterval(),
            sys.get_int_max_str_digits(),
            sys.dont_write_bytecode,
        ),
        "sys.monitoring": _monitoring(),
        "sys.__stdout__": (sys.__stdout__, sys.__stderr__, sys.__stdin__),
        "warnings.filters": list(warnings.filters),
        "gc": (gc.isenabled(), gc.get_threshold(), list(gc.callbacks), gc.get_debug()),
        "atexit": atexit._ncallbacks(),
    }
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        values["numpy options"] = (
            _safe(numpy.get_printoptions),
            _safe(numpy.geterr),
            _safe(numpy.geterrcall),
        )
    jax_config = getattr(sys.modules.get("jax"), "config", None)
    holders = getattr(jax_config, "_value_holders", None)
    if isinstance(holders, dict):
        values["jax.config"] = {
            name: _safe(functools.partial(getattr, h, "value")) for name, h in holders.items()
        }
    core = sys.modules.get("jax._src.core")
    if core is not None and hasattr(core, "trace_state_clean"):
        values["jax trace state"] = _safe(core.trace_state_clean)
    return values


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _monitoring() -> tuple[Any, ...]:
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return ()
    return tuple(monitoring.get_tool(i) for i in range(6))


def _random_states() -> tuple[Any, Any]:
    numpy_random = sys.modules.get("numpy.random")
    state = numpy_random.get_state() if numpy_random is not None else None
    return random.getstate(), state


def _set_random_states(states: tuple[Any, Any]) -> None:
    random.setstate(states[0])
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None and states[1] is not None:
        numpy_random.set_state(states[1])


def first_differences(items: Iterable[str], n: int = 6) -> list[str]:
    out = list(items)
    return out[:n] + ([f"... {len(out) - n} more"] if len(out) > n else [])
