"""``/api/v1/backends``, ``/healthz``, ``/metrics``."""

from __future__ import annotations

import sys
from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from backend.app.core.errors import ApiError
from backend.app.core.wire import BackendsAnswer, Health, LibraryInfo, VersionInfo, WorkerInfo
from backend.app.relay.service import DEVICELESS_TARGETS
from backend.app.services.container import Services, ServicesDep
from sandbox.environments import libraries
from sandbox.pool.base import ChoosesLibraries, RunsVersions

router = APIRouter(tags=["server"])


@router.get("/api/v1/backends", response_model=BackendsAnswer)
async def backends(services: ServicesDep) -> BackendsAnswer:
    """The worker pools this server reaches (backend, devices, JAX version, queue), and
    the GPU targets and TPU topologies a run may compile for without the hardware."""
    offered = {rule.setting: list(rule.offered(services.settings)) for rule in DEVICELESS_TARGETS}
    pools = _pools(services)
    return BackendsAnswer(
        backends=pools, gpu_targets=offered["gpu_targets"], tpu_topologies=offered["tpu_topologies"]
    )


def _pools(services: Services) -> list[WorkerInfo]:
    stats = services.pool.stats()
    if isinstance(stats.get("backends"), dict):
        return _registered(services, stats["backends"])
    running = stats.get("running") if isinstance(stats.get("running"), int) else None
    capacity = stats.get("capacity") if isinstance(stats.get("capacity"), int) else None
    seen = {
        name: worker
        for (name, devices), worker in services.cache.workers().items()
        if name != "auto" and devices == 1
    }
    if not seen:
        seen = {"auto": {}}
    answer = []
    for name, worker in sorted(seen.items()):
        answer.append(
            WorkerInfo(
                name=name,
                pool=services.pool_name,
                backend=_text(worker, "backend"),
                platform=_text(worker, "platform"),
                device_kind=_text(worker, "device_kind"),
                devices=_count(worker, "devices"),
                jax_version=_text(worker, "jax_version"),
                jaxlib_version=_text(worker, "jaxlib_version"),
                queue_length=services.admission.queue_length(name)
                + services.admission.queue_length("auto"),
                running=running,
                capacity=capacity,
                versions=_versions(services.pool, _text(worker, "jax_version")),
            )
        )
    return answer


def _versions(pool: Any, seen: str | None) -> list[VersionInfo]:
    """Each JAX version the local pool can run or could install; for a pool that runs
    one version (remote workers), the one its workers reported."""
    if not isinstance(pool, RunsVersions):
        return (
            [
                VersionInfo(
                    version=seen,
                    installed=True,
                    default=True,
                    running=True,
                    libraries=_libraries(seen, pool=pool),
                )
            ]
            if seen
            else []
        )
    running = set(pool.running_versions())
    return [
        VersionInfo(
            version=row.version,
            installed=row.installed,
            default=row.default,
            running=row.version in running,
            libraries=_libraries(row.version, row.python, pool),
        )
        for row in pool.versions()
    ]


def _libraries(version: str, python: str = "", pool: Any = None) -> list[LibraryInfo]:
    """What the version's committed library lock offers, for the interpreter it runs
    (``python``: "3.13.0", "3.12.1 (would use)"): read from the lock, nothing imported;
    with the other versions of each a request may pick where the pool runs them."""
    menu = pool.library_menu(version) if isinstance(pool, ChoosesLibraries) else {}
    return [
        LibraryInfo(
            name=name,
            version=v,
            what=libraries.BY_NAME[name].what,
            alternatives=list(menu.get(name, {}).get("alternatives", [])),  # type: ignore[call-overload]
        )
        for name, v in libraries.offered(version, python.partition(" ")[0] or None).items()
    ]


def _registered(services: Services, backends: dict[str, Any]) -> list[WorkerInfo]:
    """Remote pools: what the live workers registered (devices, JAX version), per
    backend, with the runs waiting for them in Redis and in this server's queue."""
    answer = []
    for name in sorted(backends):
        view = backends[name]
        if not isinstance(view, dict) or not view.get("workers"):
            continue
        worker: dict[str, Any] = view["worker"] if isinstance(view.get("worker"), dict) else {}
        answer.append(
            WorkerInfo(
                name=name,
                pool=services.pool_name,
                backend=name,
                platform=_text(worker, "platform"),
                device_kind=_text(worker, "device_kind"),
                devices=_count(worker, "devices"),
                jax_version=_text(worker, "jax_version"),
                jaxlib_version=_text(worker, "jaxlib_version"),
                queue_length=(_count(view, "queue_length") or 0)
                + services.admission.queue_length(name)
                + services.admission.queue_length("auto"),
                running=_count(view, "running"),
                capacity=_count(view, "capacity"),
                versions=_versions(services.pool, _text(worker, "jax_version")),
            )
        )
    return answer


def _text(worker: dict[str, Any], key: str) -> str | None:
    value = worker.get(key)
    return value[:200] if isinstance(value, str) else None


def _count(worker: dict[str, Any], key: str) -> int | None:
    value = worker.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@router.get("/healthz", response_model=Health)
async def healthz(services: ServicesDep) -> Health:
    """Liveness: the server answers."""
    return Health(
        version=services.version, pool=services.pool_name, jax_imported="jax" in sys.modules
    )


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "content": {"text/plain": {"schema": {"type": "string"}}},
            "description": "Prometheus text format.",
        }
    },
)
async def metrics(services: ServicesDep) -> Response:
    """Prometheus metrics (unless `JAXPLAY_METRICS_PUBLIC` is off: then a 404)."""
    if not services.settings.metrics_public:
        raise ApiError(404, "not_found", "metrics are not served on this port")
    return Response(services.metrics.render(), media_type=CONTENT_TYPE_LATEST)
