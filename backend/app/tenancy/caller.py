"""Who asks for a run, as the server knows it (made by backend/app/tenancy/identity.py from a
request's session, token or address; held to its limits by backend/app/tenancy/admission.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    """Who asks (backend/app/tenancy/identity.py): ``tenant`` owns pool workers and is who the
    cache counts as one source of evidence; ``rate_key`` pays the rate limit;
    ``client`` (the address, IPv6 by /56; empty for a known API token) is held to
    ``max_runs_per_client`` and waits its turn in the queue."""

    tenant: str
    rate_key: str
    client: str = ""
    max_runs: int | None = None  # overrides max_runs_per_tenant
    #: whether its runs may shape a process kept for its later runs: False for an
    #: address-only caller (no session, no token: everyone behind one NAT would share
    #: it) and for a run of code that is not the caller's own (backend/app/
    #: trust/provenance.py); such a run's process, zygote and jail serve it alone
    keeps_process: bool = True
