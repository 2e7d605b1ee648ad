"""The ``asm`` output: each compiled kernel's code, read from XLA's dump of the
compile (core/xla_dump.py), tied to the HLO instruction it computes and the user's
lines that made it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

from sandbox.engine.core import gpu_target
from sandbox.engine.core.output import Output, Results
from sandbox.engine.core.xla_dump import Dump, instruction_lines, too_big
from sandbox.protocol.limits import MAX_KERNELS, MAX_PASSES_CHARS, MAX_TEXT_CHARS

#: objdump's time for one object file
OBJDUMP_TIMEOUT_S = 10.0
OBJDUMP = "/usr/bin/objdump"
#: A kernel in PTX: ``.visible .entry NAME(`` to the brace that closes its body
_PTX_ENTRY = re.compile(r"^(?:\.visible |\.weak )?\.entry ([\w$]+)\(.*?^\}", re.M | re.S)


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
    if note := too_big(dump):
        event["notes"].append(note)
        return event
    if ptx:
        functions = _ptx_functions(dump, [files[name] for name in ptx], event["notes"])
    elif not os.access(OBJDUMP, os.X_OK):
        event["notes"].append(f"{OBJDUMP} (Debian's binutils) is not installed on this worker")
        return event
    else:
        functions = _object_functions([files[name] for name in objects], event["notes"])
    lines_of = instruction_lines(hlo_text)
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


def asm_events(r: Results) -> dict[str, Any]:
    assert r.dump is not None, "the row asks for a dump"
    event = asm_event(r.dump, r.compiled.as_text())
    return gpu_target.with_autotuning_note(event, r.compiled)


OUTPUT = Output("compiled", "disassembling the kernels", asm_events, dumps=("kernels",))
