"""The messages between the warm pool and a zygote, on its control socket.

One SOCK_SEQPACKET datagram each, a JSON object with ``op``. The pool sends orders
(``RunOrder``, with three descriptors; ``KillOrder``); the zygote sends reports
(``Ready``, its hello, once; ``Warm``; ``Started``; ``Exited``; ``Kept``). Each kind
is defined here once and read by ``decode_order`` or ``decode_report``, which refuse
an unknown ``op`` or a hello of another ``VERSION`` with ``ControlError``.

The zygote never runs user code, but its reports are still read as untrusted: a
field of the wrong type reads as the safe value (``status`` None, ``clean`` false,
``kept`` false, no ``worker``), as the pool always read them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

#: Said in the zygote's hello; a pool refuses a zygote that speaks another.
VERSION = 1
#: Largest message either side sends (they are a few dozen bytes; ``Ready`` and
#: ``Warm`` carry the engine's short description of what it runs on).
MAX_BYTES = 4096


class ControlError(ValueError):
    """A control message that is not one of this module's, or of another version."""


@dataclass(frozen=True)
class Keep:
    """The run's process may serve the tenant's next run: at most ``runs`` runs, at
    most ``rss_kib`` of resident memory."""

    runs: int
    rss_kib: int


@dataclass(frozen=True)
class RunOrder:
    """Run the worker message in the memfd sent with it (descriptors: message, event
    pipe, stderr pipe); ``warm``: the request fits the pre-forked warm child."""

    op: ClassVar[str] = "run"
    warm: bool
    keep: Keep | None = None


@dataclass(frozen=True)
class KillOrder:
    """SIGKILL the current run's process (a cancel)."""

    op: ClassVar[str] = "kill"


@dataclass(frozen=True)
class Ready:
    """The zygote's hello: JAX imported, its first warm child warm (``warm``) or not
    yet; ``worker`` what that child said it runs on, before any run."""

    op: ClassVar[str] = "ready"
    version: int
    ms: float = 0.0
    rss_kib: int = 0
    threads: int = 0
    compile_cache: bool = False
    identity_check: str = ""
    warm: bool = False
    worker: dict[str, Any] | None = None
    platforms: str = ""


@dataclass(frozen=True)
class Warm:
    """A warm child is ready; ``worker`` when the first one's description came after
    the hello (a slow start)."""

    op: ClassVar[str] = "warm"
    worker: dict[str, Any] | None = None


@dataclass(frozen=True)
class Started:
    """The run's process: the warm child (``warm``), one kept from ``reused`` earlier
    runs, or a cold child."""

    op: ClassVar[str] = "started"
    pid: int = 0
    warm: bool = False
    reused: int = 0


@dataclass(frozen=True)
class Exited:
    """The run is over and the jail cleaned (``clean``: nothing survived);
    ``judging``: its process was spared and is checked now, ``Kept`` follows."""

    op: ClassVar[str] = "exited"
    status: int | None = None
    clean: bool = False
    judging: bool = False


@dataclass(frozen=True)
class Kept:
    """Whether the ended run's process serves the tenant's next run, and why not."""

    op: ClassVar[str] = "kept"
    kept: bool = False
    why: str = ""


Order = RunOrder | KillOrder
Report = Ready | Warm | Started | Exited | Kept

_ORDERS: dict[str, type[Order]] = {k.op: k for k in (RunOrder, KillOrder)}


def encode(message: Order | Report) -> bytes:
    fields = {k: v for k, v in asdict(message).items() if v is not None}
    return json.dumps({"op": message.op, **fields}).encode()


def _object(data: bytes) -> tuple[str, dict[str, Any]]:
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise ControlError(f"a control message that is not JSON: {exc}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("op"), str):
        raise ControlError("a control message without an op")
    return obj["op"], obj


def _int(value: Any, default: int | None = 0) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _worker(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def decode_order(data: bytes) -> Order:
    """An order from the pool (ControlError: not one)."""
    op, obj = _object(data)
    if op not in _ORDERS:
        raise ControlError(f"an unknown control order {op[:40]!r}")
    if op == "kill":
        return KillOrder()
    keep = obj.get("keep")
    runs = _int(keep.get("runs"), None) if isinstance(keep, dict) else None
    rss = _int(keep.get("rss_kib"), None) if isinstance(keep, dict) else None
    return RunOrder(
        warm=obj.get("warm") is True,
        keep=Keep(runs, rss) if runs is not None and rss is not None else None,
    )


def decode_report(data: bytes) -> Report:
    """A report from a zygote (ControlError: not one, or a hello of another VERSION)."""
    op, obj = _object(data)
    if op == "ready":
        version = obj.get("version")
        if version != VERSION:
            raise ControlError(
                f"the zygote speaks control version {version!r}, this pool {VERSION}"
            )
        ms = obj.get("ms")
        return Ready(
            version=VERSION,
            ms=float(ms) if isinstance(ms, int | float) else 0.0,
            rss_kib=_int(obj.get("rss_kib")) or 0,
            threads=_int(obj.get("threads")) or 0,
            compile_cache=obj.get("compile_cache") is True,
            identity_check=_str(obj.get("identity_check"))[:16],
            warm=obj.get("warm") is True,
            worker=_worker(obj.get("worker")),
            platforms=_str(obj.get("platforms")),
        )
    if op == "warm":
        return Warm(worker=_worker(obj.get("worker")))
    if op == "started":
        return Started(
            pid=_int(obj.get("pid")) or 0,
            warm=obj.get("warm") is True,
            reused=_int(obj.get("reused")) or 0,
        )
    if op == "exited":
        return Exited(
            status=_int(obj.get("status"), None),
            clean=obj.get("clean") is True,
            judging=obj.get("judging") is True,
        )
    if op == "kept":
        return Kept(kept=obj.get("kept") is True, why=_str(obj.get("why")))
    raise ControlError(f"an unknown control report {op[:40]!r}")


# --- the zygote and the children it forks ------------------------------------------
# Inside the jail, each forked child and the zygote share a SOCK_SEQPACKET pair of
# their own. Its words are bare bytes, not the messages above: a child says them
# between runs from code that must stay small, and what a child says is read as its
# run's code may have written it (the zygote checks the run token of each report).

#: child → zygote: its warm-up is done; ``warm <json>`` adds what it runs on
WARM = b"warm"
#: child → zygote: its Python-state baseline is taken (it may be kept after a run)
BASE = b"base"
#: zygote → a warm child still warming up: a run is coming, take the baseline now
HURRY = b"hurry"
#: zygote → child: run once, then exit
ONCE = b"once"
#: zygote → child: ``run <token>``: run, and after a clean run report (with the
#: token) and wait for the tenant's next run
RUN = b"run "
#: zygote → a kept child that reported its run's end: the end is reported to the pool
#: now (after the cleanup), check your state. A jail has one CPU: a check that began
#: at once would hold the zygote's report back by its share of the CPU
CHECK = b"check"
#: How long a child's ``warm <json>`` may be.
MAX_WARM_BYTES = 4000


def warm_word(described: bytes | None) -> bytes:
    """The child's ``warm``, with its description when it has one that fits."""
    if described is None or len(described) >= MAX_WARM_BYTES:
        return WARM
    return WARM + b" " + described


def warm_description(word: bytes) -> bytes | None:
    """What a child's ``warm`` word says it runs on (None: a bare ``warm``, or not a
    ``warm`` at all: see ``is_warm``)."""
    head, _, rest = word.partition(b" ")
    return rest if head == WARM and rest else None


def is_warm(word: bytes) -> bool:
    return word.partition(b" ")[0] == WARM


def run_word(token: bytes | None) -> bytes:
    """The order to a child: ``run <token>`` (it may be kept after), or ``once``."""
    return RUN + token if token is not None else ONCE


def run_token(word: bytes) -> bytes | None:
    """The token of a ``run <token>`` order (None: ``once`` or anything else)."""
    return word[len(RUN) :] if word.startswith(RUN) else None


def child_report(token: str, **fields: Any) -> bytes:
    """A child's report on its run (``code``: how it ended; ``changes``: its check)."""
    return json.dumps({"token": token, **fields}).encode()
