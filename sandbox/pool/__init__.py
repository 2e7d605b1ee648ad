"""Pools run requests somewhere and stream their events back (see base.Pool).

``make_pool`` picks the jailed warm pool, and refuses to run untrusted code without a
jail unless the unsafe development flag is given (loudly).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

UNSAFE_WARNING = (
    "UNSAFE: JAXPLAY_UNSAFE_NO_JAIL is set and the jail is unavailable (%s): user code "
    "runs WITHOUT a sandbox, with this process's rights, files, network and secrets. "
    "Development only; never expose this server to anyone."
)


def make_pool(
    *,
    unsafe_no_jail: bool | None = None,
    limits: Any = None,
    config: Any = None,
    settings: Any = None,
) -> Any:
    """The jailed warm pool, constructed (not started).

    Without a usable jail it raises ``JailUnavailable`` (which says what is missing),
    unless ``unsafe_no_jail`` (default: ``JAXPLAY_UNSAFE_NO_JAIL``) is true: then it
    logs a loud warning and returns an unjailed ``SubprocessPool``.
    """
    from sandbox.jail.jail import Jailer, JailUnavailable
    from sandbox.jail.settings import JailConfig
    from sandbox.pool.zygote_pool import ZygotePool

    config = config or JailConfig.from_env()
    unsafe = config.unsafe_no_jail if unsafe_no_jail is None else unsafe_no_jail
    try:
        return ZygotePool(Jailer(limits, config), settings)
    except JailUnavailable as exc:
        if not unsafe:
            raise JailUnavailable(
                f"{exc}. jaxplay will not run untrusted code without its jail; for local "
                "development only, set JAXPLAY_UNSAFE_NO_JAIL=1"
            ) from None
        log.critical(UNSAFE_WARNING, exc)
        from sandbox.pool.subprocess_pool import SubprocessPool

        return SubprocessPool()
