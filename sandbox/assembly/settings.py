"""Every setting of the sandbox in one object: the jail's limits, how jails are made,
and the warm pool's sizes.

Each part is a frozen dataclass whose fields are the declarations (name, type,
default, help): ``JailLimits`` and ``JailConfig`` (sandbox/jail/settings.py),
``PoolSettings`` (sandbox/pool/settings.py). ``SandboxSettings.read()`` reads them
all once, at start-up; the parts are then passed down to what needs them (a
``Jailer`` its limits and config, a pool its sizes) and nothing below reads the
environment. The server's settings (backend/app/core/settings.py) hold one of these, so
the program has one settings object; the sandbox used on its own reads this one.
No pydantic here: the jail's runtime (every JAX version's environment) need not
have it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sandbox.jail.settings import JailConfig, JailLimits, read_env
from sandbox.pool.settings import PoolSettings

#: attribute of ``SandboxSettings`` -> the part's class, in the order docs list them
PARTS: dict[str, type] = {"limits": JailLimits, "jail": JailConfig, "pool": PoolSettings}


@dataclass(frozen=True)
class SettingInfo:
    """One declared setting, for listings (``jaxplay settings``, docs/settings.md)."""

    name: str
    part: str
    kind: str
    default: Any
    doc: str

    @property
    def variable(self) -> str:
        return "JAXPLAY_" + self.name.upper()


def _kind(f: dataclasses.Field[Any]) -> str:
    return "bytes" if f.metadata.get("size") else type(f.default).__name__


def declarations() -> list[SettingInfo]:
    """Every sandbox setting, part by part."""
    return [
        SettingInfo(f.name, part, _kind(f), f.default, f.metadata["help"])
        for part, cls in PARTS.items()
        for f in dataclasses.fields(cls)
    ]


#: setting name -> the part that declares it
OWNER: dict[str, str] = {info.name: info.part for info in declarations()}


@dataclass(frozen=True)
class SandboxSettings:
    limits: JailLimits = field(default_factory=JailLimits)
    jail: JailConfig = field(default_factory=JailConfig)
    pool: PoolSettings = field(default_factory=PoolSettings)

    @classmethod
    def read(
        cls,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> SandboxSettings:
        """From ``JAXPLAY_*`` (``environ``, by default the process's), ``overrides``
        (setting name -> value: flags) on top. A bad value raises ``ValueError``
        naming the variable."""
        env = os.environ if environ is None else environ
        given = dict(overrides or {})
        unknown = sorted(set(given) - set(OWNER))
        if unknown:
            raise ValueError(f"not sandbox settings: {', '.join(unknown)}")
        parts: dict[str, Any] = {
            part: read_env(
                kind, env, overrides={k: v for k, v in given.items() if OWNER[k] == part}
            )
            for part, kind in PARTS.items()
        }
        return cls(**parts)

    def replace(self, **values: object) -> SandboxSettings:
        """These settings with some changed (by setting name), values checked and
        converted as when read."""
        unknown = sorted(set(values) - set(OWNER))
        if unknown:
            raise ValueError(f"not sandbox settings: {', '.join(unknown)}")
        parts: dict[str, Any] = {}
        for part, kind in PARTS.items():
            mine = {k: v for k, v in values.items() if OWNER[k] == part}
            if mine:
                fresh: Any = read_env(kind, {}, overrides=mine)
                parts[part] = dataclasses.replace(
                    getattr(self, part), **{k: getattr(fresh, k) for k in mine}
                )
        return dataclasses.replace(self, **parts)

    def values(self) -> dict[str, Any]:
        """Setting name -> value, every part's."""
        return {name: getattr(getattr(self, part), name) for name, part in OWNER.items()}
