"""``GET /api/v1/stats`` and ``GET /stats``: the service's public figures
(backend/app/relay/figures.py; the page: backend/app/outside/figures_page.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from backend.app.core.errors import ApiError
from backend.app.outside.figures_page import page
from backend.app.relay.figures import RunStats
from backend.app.services.container import Services, ServicesDep

router = APIRouter(tags=["server"])


class Latency(BaseModel):
    count: int = Field(description="Runs that had an IR event.")
    p50: float | None = Field(description="Median ms from the key to the first IR event.")
    p95: float | None


class Summary(BaseModel):
    runs: int
    cache_hits: int
    cache_hit_rate: float | None = Field(description="cache_hits / runs; null for no runs.")
    first_output_ms: Latency


class Window(Summary):
    per_version: dict[str, Summary] = Field(description="The same, per JAX version.")


class HourBar(BaseModel):
    start: float = Field(description="The hour's start, Unix seconds.")
    runs: int
    cache_hits: int
    p50_ms: float | None
    p95_ms: float | None


class StatsAnswer(BaseModel):
    generated_at: float = Field(description="Unix seconds.")
    hour: Window = Field(description="The last hour.")
    day: Window = Field(description="The last day.")
    day_by_hour: list[HourBar] = Field(description="The last day, 24 hours, oldest first.")


async def _figures(services: Services) -> dict[str, Any]:
    stats: RunStats | None = services.runs.stats
    if not services.settings.public_stats or stats is None:
        raise ApiError(404, "not_found", "this server publishes no figures")
    return await stats.figures()


@router.get("/api/v1/stats", response_model=StatsAnswer)
async def stats_json(services: ServicesDep) -> StatsAnswer:
    """Runs in the last hour and day, the cache's hit rate and the first-output latency
    (p50, p95), per JAX version, from the server's own records; no code, no identity."""
    return StatsAnswer.model_validate(await _figures(services))


@router.get("/stats", response_class=HTMLResponse, include_in_schema=False)
async def stats_page(services: ServicesDep) -> HTMLResponse:
    return HTMLResponse(page(await _figures(services)), headers={"Cache-Control": "no-cache"})
