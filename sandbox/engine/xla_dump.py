"""What XLA did, read from its dump folder: the passes, the kernels, the memory.

A compile that asks for ``passes``, ``asm`` or ``memory`` runs with XLA's dump
options pointed at a private folder under the run's ``/tmp`` (inside the jail a
size-capped tmpfs); it is read back within a budget and deleted when the pipeline's
outputs are made. A module too large for a budget says so in the event's notes
rather than failing the run.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.engine.sources import hlo_sources
from sandbox.protocol.limits import (
    MAX_BUFFERS,
    MAX_KERNELS,
    MAX_PASS_ITEMS,
    MAX_PASSES_CHARS,
    MAX_TEXT_CHARS,
)

#: What is read back from one dump at most (the tmpfs caps what XLA may write)
MAX_DUMP_BYTES = 64 * 1024 * 1024
#: objdump's time for one object file
OBJDUMP_TIMEOUT_S = 10.0
OBJDUMP = "/usr/bin/objdump"
#: the option that has XLA dump each kernel's LLVM IR (before and after LLVM's
#: optimisation) and on GPU its PTX, where it knows it
EMITTER_OPTION = "xla_dump_emitter_re"
#: what it matches on GPU: the LLVM IR and the PTX only (".*" also has Triton log
#: every MLIR pass of each GEMM kernel: megabytes, and ten times the compile)
GPU_EMITTERS = "^(ptx|llvm)$"
#: Free space left in the dump's file system under which the dump is taken to be cut
#: short (XLA logs a failed write and goes on: its files would be partial)
MIN_FREE_BYTES = 512 * 1024
_PASS_FILE = re.compile(r"^(\d{4})\.([^.]+)\.after_(.+?)(?:\.before_.+)?\.txt$")
_DTYPE_SHAPE = re.compile(r"^([a-z]+[0-9]*)\[([0-9,]*)\]")
#: A kernel in PTX: ``.visible .entry NAME(`` to the brace that closes its body
_PTX_ENTRY = re.compile(r"^(?:\.visible |\.weak )?\.entry ([\w$]+)\(.*?^\}", re.M | re.S)


@dataclass
class Dump:
    folder: Path

    def compiler_options(self, *, passes: bool, kernels: bool, gpu: bool = False) -> dict[str, Any]:
        """XLA's options for this dump; the module after every pass only when the
        passes are asked for (the rest costs a few files, not one per pass), each
        kernel's LLVM IR (and on ``gpu`` its PTX) only when the asm is."""
        options: dict[str, Any] = {"xla_dump_to": str(self.folder), "xla_dump_hlo_as_text": True}
        if passes:
            options["xla_dump_hlo_pass_re"] = ".*"
        if kernels:
            options[EMITTER_OPTION] = GPU_EMITTERS if gpu else ".*"
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


def _too_big(dump: Dump) -> str | None:
    if why := dump.full():
        return why
    size = dump.size()
    if size > MAX_DUMP_BYTES:
        return f"XLA's dump of this module is {size:,} bytes, over the {MAX_DUMP_BYTES:,} read back: not shown"
    return None


def _no_dump_note() -> str:
    return (
        "XLA wrote no dump of this module (this JAX version may not dump it, or the run's "
        "/tmp is full)"
    )


# --- passes ----------------------------------------------------------------------


def passes_event(dump: Dump, hlo_text: str) -> dict[str, Any]:
    """Every pass that changed the module, in order; first the module before
    optimisation, last the optimised module exactly as the ``hlo`` output shows it."""
    event: dict[str, Any] = {"type": "passes", "items": [], "notes": []}
    files = dump.files()
    if not files:
        event["notes"].append(_no_dump_note())
        return event
    if note := _too_big(dump):
        event["notes"].append(note)
        return event
    steps: list[tuple[str, str, str]] = [
        ("", "before-optimizations", dump.read(files["before_optimizations.txt"]))
    ]
    for name in sorted(files):
        match = _PASS_FILE.match(name)
        if match:
            steps.append((match.group(2), match.group(3), dump.read(files[name])))
    changed = [steps[0]]
    for step in steps[1:]:
        if step[2] != changed[-1][2]:
            changed.append(step)
    if changed[-1][2] != hlo_text:
        # XLA's last dump and the executable's own text differ (a later pass that
        # dumps nothing, or printing options): the list ends with the latter
        changed.append(("", "as-compiled", hlo_text))
    too_long = max(len(text) for _, _, text in changed)
    if too_long > MAX_TEXT_CHARS:
        event["notes"].append(
            f"the module's text is {too_long:,} characters, over the {MAX_TEXT_CHARS:,} an "
            "item may carry; the pass list is not shown"
        )
        return event
    event["items"], notes = _items_within_budget(changed)
    event["notes"] += notes
    return event


def _items_within_budget(
    changed: list[tuple[str, str, str]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Items with their whole text while all of them fit MAX_PASSES_CHARS; else the
    middle ones carry a unified diff from the item before; passes beyond the budget
    are left out (and counted in a note). First and last always carry text."""
    notes: list[str] = []
    whole = sum(len(text) for _, _, text in changed)
    use_diff = whole > MAX_PASSES_CHARS
    first, last = changed[0], changed[-1]
    budget = MAX_PASSES_CHARS - len(first[2]) - len(last[2])
    items = [_item(first, text=True)]
    left_out = 0
    previous = first[2]
    for step in changed[1:-1]:
        if len(items) >= MAX_PASS_ITEMS - 1:
            left_out += 1
            continue
        item = _item(step, text=not use_diff, previous=previous)
        cost = len(item.get("text") or item.get("diff") or "")
        if cost > budget:
            left_out += 1
            continue
        budget -= cost
        items.append(item)
        previous = step[2]
    last_item = _item(last, text=True)
    items.append(last_item)
    if use_diff:
        notes.append("the module is large: passes after the first carry a diff from the one before")
    if left_out:
        notes.append(
            f"{left_out} changing passes are not shown: the module is too large for the event's "
            "budget (xla_disable_hlo_passes in compiler_options leaves passes out)"
        )
    return items, notes


def _item(step: tuple[str, str, str], *, text: bool, previous: str = "") -> dict[str, Any]:
    pipeline, name, body = step
    item: dict[str, Any] = {"pipeline": pipeline[:1024], "pass": name[:1024]}
    if text:
        item["text"] = body
        item["sources"] = hlo_sources(body)
    else:
        diff = difflib.unified_diff(
            previous.splitlines(True), body.splitlines(True), "before", "after", n=2
        )
        item["diff"] = "".join(diff)
    return item


# --- asm -------------------------------------------------------------------------


def asm_event(dump: Dump, hlo_text: str) -> dict[str, Any]:
    """Each compiled kernel's code, tied to the HLO instruction it computes and the
    user's lines that made it: on CPU the disassembly of XLA's object files
    (objdump), on GPU (a GPU worker's compile, or one for a ``gpu_target``) the PTX
    that LLVM's NVPTX backend made of it, as XLA hands it to ptxas."""
    event: dict[str, Any] = {"type": "asm", "kernels": [], "notes": []}
    files = dump.files()
    ptx = sorted(name for name in files if name.endswith(".ptx"))
    objects = sorted(name for name in files if name.endswith(".o"))
    if not ptx and not objects:
        event["notes"].append(
            "XLA wrote no object files or PTX for this module (a backend other than CPU and "
            "GPU, or a JAX version that does not dump them)"
        )
        return event
    if note := _too_big(dump):
        event["notes"].append(note)
        return event
    if ptx:
        functions = _ptx_functions(dump, [files[name] for name in ptx], event["notes"])
    elif not os.access(OBJDUMP, os.X_OK):
        event["notes"].append(f"{OBJDUMP} (Debian's binutils) is not installed on this worker")
        return event
    else:
        functions = _object_functions([files[name] for name in objects], event["notes"])
    lines_of = _instruction_lines(hlo_text)
    llvm = _llvm_ir(files, "ir-with-opt")
    llvm_before = _llvm_ir(files, "ir-no-opt")
    budget, ir_left_out = MAX_PASSES_CHARS, 0
    for symbol, asm in functions:
        if len(event["kernels"]) >= MAX_KERNELS or len(asm) > budget:
            event["notes"].append("more kernels than an event carries: the rest are not shown")
            break
        budget -= len(asm)
        fusion = _fusion_of(symbol, lines_of)
        kernel = {
            "name": symbol[:1024],
            "fusion": fusion,
            "llvm_ir": llvm.get(symbol),
            "llvm_ir_before": llvm_before.get(symbol),
            "asm": asm,
            "lines": sorted(lines_of.get(fusion, set()))[:256] if fusion else [],
        }
        ir_chars = len(kernel["llvm_ir"] or "") + len(kernel["llvm_ir_before"] or "")
        if ir_chars > budget:  # the assembly first: its IR only while it fits
            kernel["llvm_ir"] = kernel["llvm_ir_before"] = None
            ir_left_out += 1
        else:
            budget -= ir_chars
        event["kernels"].append(kernel)
    if ir_left_out:
        event["notes"].append(f"the LLVM IR of {ir_left_out} kernels is over the event's budget")
    return event


def _object_functions(paths: list[Path], notes: list[str]) -> list[tuple[str, str]]:
    """(function symbol, its instructions) of every object file objdump can read."""
    functions: list[tuple[str, str]] = []
    for path in paths:
        try:
            functions += _disassemble(path)
        except (subprocess.SubprocessError, OSError) as exc:
            name = path.name.split(".", 2)[-1]
            notes.append(f"objdump could not read {name[:200]}: {type(exc).__name__}")
    return functions


def _ptx_functions(dump: Dump, paths: list[Path], notes: list[str]) -> list[tuple[str, str]]:
    """(kernel name, its ``.entry`` in PTX) of every PTX file; a note names the PTX
    version and the GPU architecture it targets."""
    functions: list[tuple[str, str]] = []
    targets: set[str] = set()
    for path in paths:
        text = dump.read(path)
        version = re.search(r"^\.version (\S+)", text, re.M)
        target = re.search(r"^\.target (\S+)", text, re.M)
        if version and target:
            targets.add(f"PTX {version.group(1)} for {target.group(1).rstrip(',')}")
        for entry in _PTX_ENTRY.finditer(text):
            functions.append((entry.group(1), entry.group(0) + "\n"))
    notes.append(
        f"{', '.join(sorted(targets)) or 'PTX'}: what LLVM's NVPTX backend made of each kernel, "
        "as XLA hands it to ptxas (which makes the GPU's machine code, not shown)"
    )
    return functions


def _disassemble(path: Path) -> list[tuple[str, str]]:
    """(function symbol, its instructions) of one object file."""
    out = subprocess.run(
        [OBJDUMP, "-d", "--no-show-raw-insn", "--no-addresses", "-M", "intel", str(path)],
        capture_output=True,
        text=True,
        timeout=OBJDUMP_TIMEOUT_S,
        check=True,
    ).stdout
    functions: list[tuple[str, str]] = []
    symbol, body = "", list[str]()
    for line in out.splitlines():
        header = re.match(r"^(?:[0-9a-f]+ )?<(.+)>:$", line)
        if header:
            if symbol and body:
                functions.append((symbol, "\n".join(body) + "\n"))
            symbol, body = header.group(1), []
        elif symbol and line.strip():
            body.append(line.rstrip())
    if symbol and body:
        functions.append((symbol, "\n".join(body) + "\n"))
    return functions


def _llvm_ir(files: dict[str, Path], kind: str) -> dict[str, str]:
    """The LLVM IR XLA dumped in ``.ll`` files named with ``kind`` (one per kernel
    module, ``NAME.ir-with-opt.ll``; in 0.4.x one per module or per part,
    ``ir-with-opt.part_00.ll``), by function name."""
    found: dict[str, str] = {}
    for name, path in files.items():
        if kind not in name or not name.endswith(".ll"):
            continue
        text = path.read_text(errors="replace")
        for match in re.finditer(r"^define [^@]*@\"?([\w.$-]+)\"?\(.*?^}", text, re.M | re.S):
            found.setdefault(match.group(1), match.group(0)[:MAX_TEXT_CHARS])
    return found


def _instruction_lines(hlo_text: str) -> dict[str, set[int]]:
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


def _fusion_of(symbol: str, instructions: dict[str, Any]) -> str | None:
    """The HLO instruction a kernel symbol computes: its name, less XLA's decorations."""
    candidates = [symbol, symbol.removeprefix("__compute_module_")]
    candidates += [re.sub(r"(_kernel|\.kernel)$", "", c) for c in candidates]
    candidates += [re.sub(r"_parallel.*$", "", c) for c in candidates]
    for candidate in candidates:
        if candidate in instructions:
            return candidate
    # a GPU kernel is named after its instruction with what PTX does not allow in a
    # name ('.', '-') made '_': gemm_fusion_dot_1 computes gemm_fusion_dot.1
    sanitized = {re.sub(r"[^\w$]", "_", name): name for name in instructions}
    return sanitized.get(symbol)


# --- memory ----------------------------------------------------------------------

_KINDS = (("parameter", "argument"), ("constant", "constant"), ("live-out", "output"))


def memory_event(dump: Dump, compiled: Any) -> dict[str, Any]:
    """The buffers XLA assigned (argument, output, temporary, constant), each value
    with the user's line that made it, and ``memory_analysis()``'s figures; the
    peak is what the executable holds at once: arguments, outputs and temporaries
    (less what outputs alias)."""
    analysis = _memory_analysis(compiled)
    event: dict[str, Any] = {
        "type": "memory",
        "peak_bytes": _peak(analysis),
        "buffers": [],
        "analysis": analysis,
        "notes": [],
    }
    files = dump.files()
    if note := _too_big(dump):
        event["notes"].append(note + "; only memory_analysis()'s figures are shown")
        return event
    name = "cpu_after_optimizations-buffer-assignment.txt"
    if name not in files:
        name = next(
            (n for n in files if n.endswith("after_optimizations-buffer-assignment.txt")), ""
        )
    if not name:
        event["notes"].append(_no_dump_note() + "; only memory_analysis()'s figures are shown")
        return event
    lines_of = _instruction_lines(compiled.as_text())
    buffers = _buffers(dump.read(files[name]), lines_of)
    if len(buffers) > MAX_BUFFERS:
        event["notes"].append(f"{len(buffers) - MAX_BUFFERS} smaller buffers are not shown")
        buffers = sorted(buffers, key=lambda b: -b["bytes"])[:MAX_BUFFERS]
    event["buffers"] = buffers
    return event


def _memory_analysis(compiled: Any) -> dict[str, int | None]:
    stats = compiled.memory_analysis()
    figures: dict[str, int | None] = {}
    for field in dir(stats):
        if field.endswith("_in_bytes") and not field.startswith("_"):
            value = getattr(stats, field)
            figures[field.removesuffix("_in_bytes")[:48]] = (
                int(value) if value is not None else None
            )
    return dict(sorted(figures.items())[:32])


def _peak(analysis: dict[str, int | None]) -> int | None:
    if analysis.get("peak_memory") is not None:
        return analysis["peak_memory"]
    parts = [analysis.get(k) for k in ("argument_size", "output_size", "temp_size")]
    if any(p is None for p in parts):
        return None
    return max(0, sum(p or 0 for p in parts) - (analysis.get("alias_size") or 0))


def _buffers(text: str, lines_of: dict[str, set[int]]) -> list[dict[str, Any]]:
    buffers: list[dict[str, Any]] = []
    kind = "temp"
    for line in text.splitlines():
        if line.startswith("allocation "):
            kind = next((k for word, k in _KINDS if word in line), "temp")
            continue
        value = re.match(
            r"^ value: <\d+ ([\w.-]+)(?: \{[\d,]*\})? @\d+> \(size=(\d+),offset=\d+\): (.+)$", line
        )
        if not value:
            continue
        name, size, shape_text = value.group(1), int(value.group(2)), value.group(3)
        shape = _DTYPE_SHAPE.match(shape_text)
        lines = sorted(lines_of.get(name, ()))
        buffers.append(
            {
                "bytes": size,
                "shape": [int(d) for d in shape.group(2).split(",") if d] if shape else [],
                "dtype": shape.group(1) if shape else shape_text[:256],
                "kind": kind,
                "line": lines[0] if lines else None,
                "name": name[:1024],
            }
        )
    return buffers
