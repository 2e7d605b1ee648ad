"""``POST /api/v1/snippets/import``: a Jupyter notebook becomes a snippet (a link) in one
step (backend/app/outside/ipynb.py reads it). The snippet is stored as
``POST /api/v1/snippets`` stores one (backend/app/services/links.py): the same size
limits and rate limit."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from backend.app.core.errors import ApiError
from backend.app.core.wire import ERROR_RESPONSES, SnippetBody
from backend.app.outside.ipynb import NotANotebook, import_notebook
from backend.app.services.container import ServicesDep
from backend.app.services.links import store_snippet
from backend.app.storage.base import canonical_json
from sandbox.protocol import MAX_CODE_BYTES

router = APIRouter(prefix="/api/v1", tags=["snippets"])


class DroppedLine(BaseModel):
    cell: int = Field(description="The cell's place in the notebook, from 0.")
    line: int = Field(description="The line's number in its cell, from 1.")
    text: str
    why: str = Field(description="`shell command`, `line magic`, `cell magic`, `help (?)`...")


class NotebookImported(BaseModel):
    id: str = Field(description="The snippet's id.")
    url: str = Field(description="The playground page with it loaded.")
    entry: str = Field(description="The function to transform: the last top-level `def`.")
    code_cells: int = Field(description="Code cells read (joined in order).")
    dropped: list[DroppedLine] = Field(description="Lines left out: not Python.")
    request: dict[str, Any] = Field(
        description="The stored run request, as `GET /api/v1/snippets/{id}` answers it."
    )


@router.post(
    "/snippets/import",
    status_code=201,
    response_model=NotebookImported,
    responses=ERROR_RESPONSES,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The .ipynb file's bytes (`application/x-ipynb+json` or JSON).",
            "content": {
                "application/x-ipynb+json": {"schema": {"type": "object"}},
                "application/json": {"schema": {"type": "object"}},
            },
        }
    },
)
async def import_snippet(request: Request, services: ServicesDep) -> JSONResponse:
    """Store a notebook's code cells as a snippet: joined in order, shell (`!`) and magic
    (`%`, `%%`) lines dropped and listed, the entry its last top-level function."""
    try:
        imported = import_notebook(await request.body())
    except NotANotebook as exc:
        raise ApiError(422, "not_a_notebook", str(exc), field="body")
    size = len(imported.code.encode())
    if size > MAX_CODE_BYTES:
        raise ApiError(
            413,
            "too_large",
            f"code: the notebook's code is {size} bytes, over {MAX_CODE_BYTES // 1024} KiB",
            field="code",
        )
    body = SnippetBody.model_validate({"code": imported.code, "entry": imported.entry})
    created = await store_snippet(body, request, services)
    answer = NotebookImported(
        id=created.id,
        url=created.url,
        entry=imported.entry,
        code_cells=imported.code_cells,
        dropped=[DroppedLine(**vars(d)) for d in imported.dropped],
        request=json.loads(canonical_json(body.to_request())),
    )
    return JSONResponse(answer.model_dump(mode="json"), status_code=201)
