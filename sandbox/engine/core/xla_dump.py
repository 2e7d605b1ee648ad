"""XLA's dump folder of one compile, which the ``passes``, ``asm`` and ``memory``
outputs read (each row says what it needs of it: ``DumpPart``).

A compile that one of them is asked for runs with XLA's dump options pointed at a
private folder under the run's ``/tmp`` (inside the jail a size-capped tmpfs); it is
read back within a budget and deleted when the pipeline's outputs are made. A module too large for a budget says so in the event's notes
rather than failing the run.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sandbox.engine.core.sources import hlo_sources

#: what an output reads of a dump: the module (its buffer assignment among the
#: files XLA writes for it), the module after each pass, each kernel's code
DumpPart = Literal["module", "passes", "kernels"]

#: What is read back from one dump at most (the tmpfs caps what XLA may write)
MAX_DUMP_BYTES = 64 * 1024 * 1024
#: the option that has XLA dump each kernel's LLVM IR (before and after LLVM's
#: optimisation) and on GPU its PTX, where it knows it
EMITTER_OPTION = "xla_dump_emitter_re"
#: What it matches: the LLVM IR and the PTX, what the ``asm`` output reads (the CPU's
#: object files are dumped with or without it). Not ".*": on GPU that also has Triton
#: log every MLIR pass of each GEMM kernel (megabytes, and ten times the compile); on
#: CPU it turns on the MLIR fusion emitters' own dumps (``*.mlir``, ``mlir-passes.log``),
#: which crash XLA when it compiles kernels on several threads ("pure virtual method
#: called", a double free, SIGSEGV: JAX 0.10.2 and 0.12.0.1; issue 50,
#: benchmarks/engine/cpu_dump_crash.py reproduces it in plain JAX).
KERNEL_EMITTERS = "^(ptx|llvm)$"
#: Free space left in the dump's file system under which the dump is taken to be cut
#: short (XLA logs a failed write and goes on: its files would be partial)
MIN_FREE_BYTES = 512 * 1024


@dataclass
class Dump:
    folder: Path

    def compiler_options(self, parts: Collection[DumpPart]) -> dict[str, Any]:
        """XLA's options for this dump of ``parts``: the module after every pass only
        when ``passes`` are asked for (the rest costs a few files, not one per pass),
        each kernel's LLVM IR (and on GPU its PTX) only when ``kernels`` are."""
        options: dict[str, Any] = {"xla_dump_to": str(self.folder), "xla_dump_hlo_as_text": True}
        if "passes" in parts:
            options["xla_dump_hlo_pass_re"] = ".*"
        if "kernels" in parts:
            options[EMITTER_OPTION] = KERNEL_EMITTERS
        return options

    def files(self) -> dict[str, Path]:
        """The files of the module compiled (the last one XLA dumped), by the
        name after their ``module_NNNN.NAME.`` prefix."""
        names = sorted(os.listdir(self.folder))
        firsts = [n for n in names if n.endswith(".before_optimizations.txt")]
        if not firsts:
            return {}
        prefix = firsts[-1][: -len("before_optimizations.txt")]
        return {n[len(prefix) :]: self.folder / n for n in names if n.startswith(prefix)}

    def full(self) -> str | None:
        """Why this dump may be incomplete (its file system filled up), or None."""
        stats = os.statvfs(self.folder)
        free = stats.f_bavail * stats.f_frsize
        if free >= MIN_FREE_BYTES:
            return None
        total = stats.f_blocks * stats.f_frsize
        return (
            f"XLA's dump of this module did not fit the run's /tmp ({total // 1024:,} KiB): "
            "not shown (ask for fewer of passes, asm, memory, or leave passes out with "
            "compiler_options xla_disable_hlo_passes)"
        )

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.folder.iterdir() if p.is_file())

    def read(self, path: Path) -> str:
        return path.read_text(errors="replace")


def compile_with(lowered: Any, options: dict[str, Any]) -> Any:
    """``lowered.compile(options)``; an XLA that does not know EMITTER_OPTION (0.4.x,
    which dumps the LLVM IR without it) refuses it before compiling anything, and is
    asked again without it."""
    try:
        return lowered.compile(options)
    except Exception as exc:
        if (
            EMITTER_OPTION not in options
            or f"No such compile option: '{EMITTER_OPTION}'" not in str(exc)
        ):
            raise
    return lowered.compile({k: v for k, v in options.items() if k != EMITTER_OPTION})


@contextlib.contextmanager
def dump_folder(wanted: bool) -> Iterator[Dump | None]:
    """A private dump folder for one compile (None when no output reads one),
    deleted afterwards whatever happened."""
    if not wanted:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="jaxplay-xla-"))
    try:
        yield Dump(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def too_big(dump: Dump) -> str | None:
    if why := dump.full():
        return why
    size = dump.size()
    if size > MAX_DUMP_BYTES:
        return f"XLA's dump of this module is {size:,} bytes, over the {MAX_DUMP_BYTES:,} read back: not shown"
    return None


def no_dump_note() -> str:
    return (
        "XLA wrote no dump of this module (this JAX version may not dump it, or the run's "
        "/tmp is full)"
    )


def instruction_lines(hlo_text: str) -> dict[str, set[int]]:
    """Each instruction of the optimised module: the user's lines that made it
    (a fusion's include those of the computation it calls)."""
    text_lines = hlo_text.split("\n")
    by_out = {s["out_line"]: s["line"] for s in hlo_sources(hlo_text)}
    instruction: dict[str, set[int]] = {}
    computation: dict[str, set[int]] = {}
    calls: dict[str, list[str]] = {}
    current = ""
    for index, line in enumerate(text_lines, start=1):
        head = re.match(r"^(?:ENTRY )?%?([\w.-]+) .*\{$", line)
        if head and not line.startswith(" "):
            current = head.group(1)
            continue
        defined = re.match(r"^\s+(?:ROOT )?%?([\w.-]+) = ", line)
        if not defined:
            continue
        lines = {by_out[index]} if index in by_out else set()
        instruction[defined.group(1)] = lines
        computation.setdefault(current, set()).update(lines)
        calls[defined.group(1)] = re.findall(r"calls=%?([\w.-]+)", line)
    for name, called in calls.items():
        for callee in called:
            instruction[name] |= computation.get(callee, set())
    return instruction
