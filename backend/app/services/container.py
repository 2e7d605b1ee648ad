"""What the routes need, built by the lifespan and handed out as a dependency."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.requests import HTTPConnection

from backend.app.core.metrics import Metrics
from backend.app.core.settings import Settings
from backend.app.relay.service import RunService
from backend.app.storage.base import Storage
from backend.app.tenancy.admission import Admission
from backend.app.tenancy.identity import Sessions
from backend.app.trust.cache import ResultCache
from sandbox.pool.base import Pool


@dataclass
class Services:
    settings: Settings
    version: str
    pool_name: str
    pool: Pool
    storage: Storage
    metrics: Metrics
    admission: Admission
    cache: ResultCache
    runs: RunService
    sessions: Sessions
    known_tokens: frozenset[str] = field(default_factory=frozenset)
    extra: dict[str, Any] = field(default_factory=dict)


def get_services(conn: HTTPConnection) -> Services:
    services: Services = conn.app.state.services
    return services


def _services_for_request(request: Request) -> Services:
    return get_services(request)


ServicesDep = Annotated[Services, Depends(_services_for_request)]
