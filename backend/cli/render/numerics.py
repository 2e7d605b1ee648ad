"""The ``numerics`` output as text (``jaxplay run --output numerics``): each output's
error against the float64 shadow, the worst line, then one line per equation (its
error and the error it adds itself, ``born``), hints below the row they are about;
the jit comparison and the precision settings when the event has them."""

from __future__ import annotations

from typing import Any


def _fig(errors: dict[str, Any] | None, key: str = "max") -> str:
    if not errors:
        return "-"
    value = errors.get(key)
    if isinstance(value, str):
        return value
    return "0" if value == 0 else f"{value:.3g}"


def _rel_ulp(errors: dict[str, Any] | None) -> str:
    if not errors:
        return "-"
    return f"{_fig(errors)} ({_fig(errors, 'max_ulp')} ulp)"


def _outputs(event: dict[str, Any]) -> list[str]:
    lines = []
    for out in event.get("outputs", []):
        name = out["path"] or "output"
        shape = f"{out['dtype']}[{','.join(map(str, out['shape']))}]"
        lines.append(
            f"  {name} {shape}: as run {_rel_ulp(out.get('run'))}, op by op {_rel_ulp(out.get('eager'))}"
        )
    return lines


def _jit(jit: dict[str, Any] | None) -> list[str]:
    if not jit:
        return []
    if not jit["differs"]:
        return ["  jit: the compiled program gives what its equations give one by one"]
    closer = {"jit": "jit is nearer float64", "eager": "op by op is nearer float64"}.get(
        jit["closer"], "both as near float64"
    )
    lines = [f"  jit changes the result ({closer})"]
    if jit.get("first_eqn") is not None:
        where = f" at line {jit['line']}" if jit.get("line") else ""
        lines.append(
            f"    first differs at eqn {jit['first_eqn']} ({jit.get('primitive')}){where}, "
            f"found in {jit.get('compiles', 0)} cut compiles"
        )
    for option in jit.get("options", []):
        said = {True: "removes it", False: "does not", None: "did not compile"}[
            option.get("removes")
        ]
        lines.append(f"    recompiled with {option['option']}={option['value']}: {said}")
    if jit.get("cause"):
        lines.append(f"    cause: {jit['cause']}")
    return lines


def _precision(event: dict[str, Any]) -> list[str]:
    settings = event.get("precision") or []
    if not settings:
        return []
    lines = ["  precision settings (normwise relative error per output):"]
    for s in settings:
        label = s["label"] + (" (emulated)" if s.get("emulated") else "")
        if s.get("error"):
            lines.append(f"    {label:<34} {s['error']}")
            continue
        lines.append(f"    {label:<34} " + "  ".join(_fig(o, "norm") for o in s["outputs"]))
        if s.get("lines"):
            per_line = ", ".join(
                f"line {ln['line']}: {_fig(ln, 'error')}" for ln in s["lines"][:12]
            )
            lines.append(f"      largest relative error per line: {per_line}")
    if event.get("precision_note"):
        lines.append(f"    {event['precision_note']}")
    return lines


def numerics_text(event: dict[str, Any]) -> str:
    pipeline = event.get("pipeline", "main")
    tag = "" if pipeline == "main" else f" [compare {pipeline}]"
    rows = event.get("rows", [])
    head = f"── numerics{tag}: {len(rows)} rows against a float64 shadow, {event.get('backend')} ──"
    if event.get("refused"):
        return f"{head}\n  refused: {event['refused']}"
    lines = [head, *_outputs(event)]
    worst = event.get("worst_born")
    if worst is not None:
        row = rows[worst]
        where = f" at line {row['line']}" if row.get("line") else ""
        lines.append(
            f"  most error born: row {worst}, {row['primitive']} (eqn {row['eqn']}){where}: "
            f"{_rel_ulp(row.get('born'))}"
        )
    lines += _jit(event.get("jit"))
    lines += _precision(event)
    lines.append(
        f"  {'row':>5}  {'eqn':<10} {'primitive':<22} {'line':>5} {'iter':>5}  {'dtype':<9}"
        f" {'error':>10} {'ulp':>10} {'born':>10} {'born ulp':>10}"
    )
    for n, row in enumerate(rows):
        mark = "*" if n == worst else "~" if not row.get("shadowed", True) else " "
        iterations = f"×{row['iterations']}" if row.get("iterations") else ""
        lines.append(
            f"{mark} {n:>5}  {row['eqn'][:10]:<10} {'  ' * min(row.get('depth', 0), 4)}"
            f"{row['primitive'][:22]:<22} {row.get('line') or '-':>5} {iterations:>5}"
            f"  {(row.get('dtype') or '-')[:9]:<9} {_fig(row.get('error')):>10}"
            f" {_fig(row.get('error'), 'max_ulp'):>10} {_fig(row.get('born')):>10}"
            f" {_fig(row.get('born'), 'max_ulp'):>10}"
        )
        if row.get("diverged"):
            lines.append(f"          {row['diverged']} integer/boolean elements differ in float64")
        if row.get("hint"):
            lines.append(f"          hint: {row['hint']['text']}")
    if event.get("cut"):
        lines.append(f"  cut ({event['cut']}): the shadow stopped early")
    lines += [f"  note: {note}" for note in event.get("notes", [])]
    return "\n".join(lines)
