"""The settings as a table: every setting's declaration (the server's, then the
sandbox's), where each value came from, a value as the environment would spell it
(secrets hidden), the Markdown tables of docs/settings.md and a flag's help. Read by
``jaxplay settings``, the commands' flags and scripts/gen_settings_doc.py; the settings
themselves are settings.py's ``Settings``."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from backend.app.core.settings import REPO, Settings
from sandbox.assembly.settings import SettingInfo
from sandbox.assembly.settings import declarations as sandbox_declarations
from sandbox.jail.settings import GiB, KiB, MiB

#: the fields of ``Settings`` that are not settings of their own
_NOT_SETTINGS = {"sandbox"}
#: settings whose values are secrets: ``jaxplay settings`` never prints them
SECRET = {"session_secret", "api_tokens"}
#: settings that are sizes in bytes (``2G``)
SIZES = {info.name for info in sandbox_declarations() if info.kind == "bytes"}
#: settings that are URLs: a password in one is hidden when printed
URLS = {"database_url", "queue_url", "public_url"}


def _kind(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return re.sub(r"\b[a-z_]+\.", "", str(annotation))  # typing.Literal -> Literal


def _shown_default(default: Any) -> Any:
    if isinstance(default, Path) and default.is_relative_to(REPO):
        return default.relative_to(REPO)
    return default


def declarations() -> list[SettingInfo]:
    """Every setting of the program: the server's, then the sandbox's."""
    server = [
        SettingInfo(
            name,
            "server",
            _kind(field.annotation),
            _shown_default(field.get_default(call_default_factory=True)),
            field.description or "",
        )
        for name, field in Settings.model_fields.items()
        if name not in _NOT_SETTINGS
    ]
    return server + sandbox_declarations()


def setting_sources(
    flags: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Setting name -> where its value came from: ``flag``, ``environment`` or ``default``."""
    env = {k.upper() for k in (os.environ if environ is None else environ)}
    given = {k for k, v in (flags or {}).items() if v is not None}
    return {
        info.name: "flag"
        if info.name in given
        else "environment"
        if info.variable in env
        else "default"
        for info in declarations()
    }


def setting_values(settings: Settings) -> dict[str, Any]:
    """Setting name -> its value in ``settings``, every setting's."""
    server = {n: getattr(settings, n) for n in Settings.model_fields if n not in _NOT_SETTINGS}
    return {**server, **settings.sandbox.values()}


def _hide_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _size(value: int) -> str:
    for unit, size in (("G", GiB), ("M", MiB), ("K", KiB)):
        if value and value % size == 0:
            return f"{value // size}{unit}"
    return str(value)


def show_value(name: str, value: Any) -> str:
    """A setting's value as it would be written in the environment (JSON for lists,
    ``2G`` for sizes), secrets hidden."""
    if value is None:
        return ""
    if name in SIZES and isinstance(value, int):
        return _size(value)
    if name in SECRET:
        return "(hidden)" if value else ("[]" if isinstance(value, list) else "")
    if name in URLS and isinstance(value, str):
        return _hide_password(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


#: the headings of docs/settings.md's tables, one per part
PART_TITLES = {
    "server": "The server (`jaxplay serve`, `jaxplay worker`)",
    "limits": "The jail's limits",
    "jail": "How jails are made",
    "pool": "The warm pool",
}


def settings_table() -> str:
    """Every setting as Markdown tables, one per part (docs/settings.md)."""
    out: list[str] = []
    for part, title in PART_TITLES.items():
        out += [
            f"### {title}",
            "",
            "| variable | type | default | meaning |",
            "| --- | --- | --- | --- |",
        ]
        for info in declarations():
            if info.part != part:
                continue
            shown = show_value(info.name, info.default).replace("|", "\\|")
            cell = f"`{shown}`" if shown else ""
            doc = info.doc.replace("|", "\\|")
            kind = info.kind.replace("|", "\\|")
            out.append(f"| `{info.variable}` | {kind} | {cell} | {doc} |")
        out.append("")
    return "\n".join(out)


def flag_help(name: str) -> str:
    """A command's flag help for the setting ``name``: its description and variable,
    so a flag never restates (or contradicts) the declaration."""
    info = next(i for i in declarations() if i.name == name)
    default = show_value(name, info.default)
    shown = f"; default {default}" if default else ""
    return f"{info.doc} ({info.variable}{shown})"
