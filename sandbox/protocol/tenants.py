"""How the server names the tenant of a run that must not shape a process kept for
anyone (issue 33): a *single-use* tenant.

A pool keeps a tenant's process (and its zygote, its jail) for that tenant's next
runs. A run whose code is not the tenant's own — a shared link's or an embed's code
as it came, or any run of a client the server cannot tell apart from others at its
address — must not: the server submits it under a tenant made by ``single_use``, a
name no other run ever has, and every pool that keeps processes (the jailed warm
pool, here or on a Redis worker, which gets the same name) retires the zygote and
its jail after that one run (sandbox/pool/zygote_pool.py). The group part (before
the first ``|``) stays the caller's, so the pool's fairness between client groups
still counts it.
"""

from __future__ import annotations

import secrets

#: the part of a tenant's name that marks it single-use
SINGLE_USE_MARK = "|once:"


def single_use(tenant: str) -> str:
    """A fresh single-use tenant in ``tenant``'s group: no other run is given it."""
    return f"{tenant}{SINGLE_USE_MARK}{secrets.token_hex(8)}"


def is_single_use(tenant: str | None) -> bool:
    """Whether a run of ``tenant`` must leave no process, zygote or jail behind."""
    return tenant is not None and SINGLE_USE_MARK in tenant
