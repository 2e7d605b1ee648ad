"""A bug report for JAX's issue form, made from a snippet's run: the description with
the link, a self-contained repro (backend/app/outside/repro.py) and what the run printed, the
first version an output changed in (when an across-versions run found one), the config
and flags, the worker's ``jax.print_environment_info()``, and the HLO. As Markdown (to
paste into the form) and as a notebook (nbformat v4; the repro its code cell).

Pure: the facts come in (backend/app/routes/report.py gathers them), text goes out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from backend.app.outside.repro import Repro
from sandbox.protocol import RunRequest


@dataclass
class ReportFacts:
    snippet_id: str
    link: str
    request: RunRequest
    repro: Repro
    status: str
    #: the value's repr as the run showed it, or the error that stopped the run
    shown: str
    worker: dict[str, Any]
    stdout: str = ""
    hlo: str | None = None
    hlo_link: str = ""
    hlo_chars: int = 20_000
    #: ``jax.print_environment_info()`` from a worker of the run's JAX version, or why not
    environment: str = ""
    #: from an across-versions run: (output, pipeline, first_changed) where it changed
    changes: list[tuple[str, str, str]] = field(default_factory=list)
    across_versions: list[str] = field(default_factory=list)


def fence(text: str, language: str = "") -> str:
    """``text`` in a code fence longer than any run of backticks in it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{text.rstrip(chr(10))}\n{ticks}"


def _version(facts: ReportFacts) -> str:
    return str(facts.worker.get("jax_version") or facts.request.jax_version or "?")


def title(facts: ReportFacts) -> str:
    what = "raises" if facts.status != "ok" else "gives"
    return f"`{facts.repro.pipeline}` {what} {_short(facts.shown)} (JAX {_version(facts)})"


def _short(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "nothing"
    return line if len(line) <= 60 else line[:57] + "..."


def _config_lines(facts: ReportFacts) -> list[str]:
    r = facts.request
    rows = [
        f"- JAX {_version(facts)}, jaxlib {facts.worker.get('jaxlib_version', '?')}, "
        f"backend `{facts.worker.get('backend', r.backend)}`, {r.devices} device(s)",
        f"- pipeline: `{facts.repro.pipeline}`, args `{r.args}`",
    ]
    if r.config:
        rows.append(f"- `jax.config`: `{json.dumps(r.config)}`")
    if r.compiler_options:
        rows.append(f"- XLA compiler options: `{json.dumps(r.compiler_options)}`")
    if r.libraries:
        rows.append(f"- libraries: `{json.dumps(r.libraries)}`")
    if r.compare:
        rows.append(f"- also compared with {len(r.compare)} other pipeline(s) (not in the repro)")
    libs = facts.worker.get("libraries")
    if isinstance(libs, dict) and libs:
        rows.append("- installed: " + ", ".join(f"{k} {v}" for k, v in sorted(libs.items())))
    return rows


def _repro_section(facts: ReportFacts) -> str:
    if facts.repro.script is None:
        return (
            "The repro is not written out: the run used "
            + ", ".join(facts.repro.not_written)
            + f", which a short script cannot reproduce faithfully. The link reproduces it: {facts.link}"
        )
    return (
        "Run with plain JAX (`python repro.py`):\n\n"
        + fence(facts.repro.script, "python")
        + "\n\nIt prints what the run showed:\n\n"
        + fence(facts.shown)
    )


def _hlo_section(facts: ReportFacts) -> str:
    if not facts.hlo:
        return "No HLO: the run did not compile."
    shown = facts.hlo[: facts.hlo_chars]
    cut = (
        f" (the first {len(shown)} of {len(facts.hlo)} characters; the whole file: "
        f"{facts.hlo_link})"
        if len(shown) < len(facts.hlo)
        else f" (attach it as a file: {facts.hlo_link})"
    )
    return f"<details><summary>Optimised HLO{cut}</summary>\n\n{fence(shown)}\n\n</details>"


def _changes_section(facts: ReportFacts) -> str:
    if not facts.across_versions:
        return ""
    if not facts.changes:
        return (
            f"### First changed in\n\nNo output changed across JAX "
            f"{', '.join(facts.across_versions)}.\n"
        )
    rows = "\n".join(f"- {out} ({pipe}): first changed in **JAX {first}**"
                     for out, pipe, first in facts.changes)  # fmt: skip
    return (
        f"### First changed in\n\nAcross JAX {', '.join(facts.across_versions)} "
        f"(jaxplay's across-versions run):\n\n{rows}\n"
    )


def markdown(facts: ReportFacts) -> str:
    """The report as JAX's issue form asks for it."""
    parts = [
        f"<!-- title: {title(facts)} -->",
        "### Description",
        f"`{facts.repro.pipeline}` on JAX {_version(facts)} ({facts.status}). "
        f"Reproduced on jaxplay: {facts.link}",
        "<!-- What did you expect instead? -->",
        _repro_section(facts),
    ]
    if facts.stdout.strip():
        parts.append("The snippet itself printed:\n\n" + fence(facts.stdout[:4000]))
    changes = _changes_section(facts)
    if changes:
        parts.append(changes.rstrip("\n"))
    parts += [
        "### Config and flags",
        "\n".join(_config_lines(facts)),
        "### System info (python version, jaxlib version, accelerator, etc.)",
        fence(facts.environment or "not available"),
        "### HLO",
        _hlo_section(facts),
    ]
    return "\n\n".join(parts) + "\n"


def notebook(facts: ReportFacts) -> str:
    """The report as a notebook: the repro its one code cell, the rest as Markdown."""
    cells = [
        new_markdown_cell(
            f"# {title(facts)}\n\nReproduced on jaxplay: {facts.link}\n\n"
            + "\n".join(_config_lines(facts))
        )
    ]
    if facts.repro.script is not None:
        cells.append(new_code_cell(facts.repro.script))
        cells.append(new_markdown_cell("The run on jaxplay printed:\n\n" + fence(facts.shown)))
    else:
        cells.append(new_markdown_cell(_repro_section(facts)))
    changes = _changes_section(facts)
    if changes:
        cells.append(new_markdown_cell(changes))
    cells.append(
        new_markdown_cell("### System info\n\n" + fence(facts.environment or "not available"))
    )
    cells.append(new_markdown_cell("### HLO\n\n" + _hlo_section(facts)))
    nb = new_notebook(
        cells=cells,
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
            "jaxplay": {"snippet": facts.snippet_id, "jax_version": _version(facts)},
        },
    )
    nbformat.validate(nb)
    text: str = nbformat.writes(nb)
    return text
