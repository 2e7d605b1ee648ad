"""Golden tests: what JAX itself prints, against what jaxplay's engine streams back.

- ``cases/<name>.json``: a run request (SPEC §1; ``code`` may be a list of lines)
  with a ``description`` and an optional ``expect`` (hints that pin down what the
  case is about: the error kind/line/stage, lines of stdout, which ops come from
  which lines, whether timing is checked, ``since``: the first JAX version with
  what the case uses; older installed versions must end it with a hinted error).
- ``reference.py``: computes, with JAX directly and independently of
  ``sandbox.engine``, the jaxpr / StableHLO / HLO texts, the value leaves and the
  sharding (specs, device blocks, collective kinds) of each pipeline, or the first
  error. Always run in a process of its own, one per case (``run_reference``: forked
  from one that imported JAX and did nothing else).
- ``data/<name>.json``: the golden files, the reference's output with the jax
  version that made it; refreshed only explicitly, with
  ``python -m tests.golden.regenerate`` (``make golden``), then reviewed as a diff.

The rules the reference implements (the engine must agree) are those of SPEC §1/§2:
transforms applied in list order, JSON arrays in options taken as tuples, the jaxpr
of ``jax.make_jaxpr(pipeline, static_argnums=S)`` with S the static arguments of
``jit`` (``static_argnames`` by their positions) and ``pmap``, the StableHLO/HLO of
``pipeline.lower`` when the outermost transform is ``jit``/``pmap`` and of
``jax.jit(pipeline, static_argnums=S).lower`` otherwise, values from
``pipeline(*args)`` with a sha256 of each leaf's C-order bytes (key data for PRNG
keys), and errors with the innermost line of ``snippet.py`` in the traceback.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from tests.golden.reference import request_of

__all__ = [
    "CASES_DIR",
    "DATA_DIR",
    "REFERENCE",
    "ROOT",
    "ReferenceServer",
    "case_names",
    "close_reference_servers",
    "from_golden",
    "jaxplay_command",
    "load_case",
    "load_golden",
    "parallel",
    "request_of",
    "run_reference",
    "to_golden",
]

GOLDEN_DIR = Path(__file__).resolve().parent
ROOT = GOLDEN_DIR.parents[1]
CASES_DIR = GOLDEN_DIR / "cases"
DATA_DIR = GOLDEN_DIR / "data"
REFERENCE = GOLDEN_DIR / "reference.py"

T = TypeVar("T")
R = TypeVar("R")


def case_names() -> list[str]:
    return sorted(p.stem for p in CASES_DIR.glob("*.json"))


def load_case(name: str) -> dict[str, Any]:
    with open(CASES_DIR / f"{name}.json") as fh:
        case: dict[str, Any] = json.load(fh)
    return case


def _lean_env() -> dict[str, str]:
    """The environment for child processes: the machine is shared, keep them small."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.pop("JAX_PLATFORMS", None)
    env.pop("XLA_FLAGS", None)
    env["PYTHONPATH"] = str(ROOT)
    return env


class ReferenceServer:
    """``reference.py --serve`` for one thread: a case at a time, each in a process
    forked for it from one that imported JAX and nothing more."""

    def __init__(self) -> None:
        # the server's own stderr (its children write theirs to files of their own):
        # read if it ends, closed with it
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(REFERENCE), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=_lean_env(),
            cwd=ROOT,
            start_new_session=True,  # a timeout kills the case's process with it
        )

    def ask(self, path: Path, timeout: float) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{path}\n".encode())
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            died = self.close()
            raise RuntimeError(
                f"the reference server gave no answer for {path.name} "
                + (f"within {timeout} s" if not ready else f"(it ended):\n{died}")
            )
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> str:
        """End the server and the case it runs, if any; what it wrote to stderr."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self._stderr.closed:
            return ""
        self._stderr.seek(0)
        said = self._stderr.read().decode(errors="replace")[-4000:]
        self._stderr.close()
        return said


_servers = threading.local()
_all_servers: list[ReferenceServer] = []
_servers_lock = threading.Lock()


@atexit.register
def close_reference_servers() -> None:
    """End every thread's reference server (each idles with JAX imported)."""
    with _servers_lock:
        for server in _all_servers:
            server.close()
        _all_servers.clear()


def run_reference(name: str, timeout: float = 180) -> dict[str, Any]:
    """The reference's output for one case, from a process of its own (forked by this
    thread's reference server; a server that timed out is replaced)."""
    server: ReferenceServer | None = getattr(_servers, "server", None)
    if server is None or server.proc.poll() is not None:
        server = _servers.server = ReferenceServer()
        with _servers_lock:
            _all_servers.append(server)
    answer = server.ask(CASES_DIR / f"{name}.json", timeout)
    if answer["exit"] != 0:
        raise RuntimeError(
            f"reference failed on {name} (exit {answer['exit']}):\n{answer['stderr'][-4000:]}"
        )
    result: dict[str, Any] = json.loads(answer["stdout"])
    return result


def parallel(fn: Callable[[T], R], items: Iterable[T], workers: int = 2) -> dict[T, Any]:
    """``fn`` over ``items`` on a small thread pool (each call runs a subprocess).
    The value for an item is what ``fn`` returned, or the exception it raised."""
    items = list(items)
    out: dict[T, Any] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {item: pool.submit(fn, item) for item in items}
        for item, future in futures.items():
            try:
                out[item] = future.result()
            except Exception as exc:
                out[item] = exc
    return out


# --- golden files: texts are stored as lists of lines, so diffs can be reviewed --


def _map_texts(obj: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(obj, dict):
        return {k: fn(v) if k == "text" else _map_texts(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_texts(v, fn) for v in obj]
    return obj


def to_golden(result: dict[str, Any]) -> dict[str, Any]:
    converted: dict[str, Any] = _map_texts(result, lambda text: text.split("\n"))
    return converted


def from_golden(data: dict[str, Any]) -> dict[str, Any]:
    converted: dict[str, Any] = _map_texts(data, lambda lines: "\n".join(lines))
    return converted


def load_golden(name: str) -> dict[str, Any] | None:
    path = DATA_DIR / f"{name}.json"
    if not path.exists():
        return None
    with open(path) as fh:
        return from_golden(json.load(fh))
