"""One error shape for every status, and the handlers that produce it.

Validation errors name the field (``transforms.0.name: ...``), text that is not
Unicode (a lone surrogate) too; an oversized ``code`` is a 413, not a 422; overload is a 429 or 503 with ``Retry-After``. Nothing the
client sends should reach a 500: internal failures of the pool or the database are
answered 503 (try again) and logged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend.app.core.logs import fields, get_logger
from backend.app.core.wire import TOO_LARGE, UNENCODABLE, ErrorBody, FieldError

log = get_logger("errors")


class ApiError(Exception):
    """An error with its HTTP status, raised anywhere below a route."""

    def __init__(
        self,
        status: int,
        error: str,
        message: str,
        *,
        field: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.error, self.message = status, error, message
        self.field, self.retry_after_s = field, retry_after_s

    def body(self) -> ErrorBody:
        return ErrorBody(
            status=self.status,
            error=self.error,
            message=self.message,
            field=self.field,
            retry_after_s=self.retry_after_s,
        )


class Overloaded(ApiError):
    """429 (this client is over its limits) or 503 (the server is full)."""

    def __init__(self, status: int, error: str, message: str, retry_after_s: float) -> None:
        super().__init__(status, error, message, retry_after_s=max(retry_after_s, 0.0))


def _dotted(loc: Sequence[Any], skip: tuple[str, ...] = ("body", "query", "path", "header")) -> str:
    parts = [str(p) for p in loc]
    while parts and parts[0] in skip:
        parts = parts[1:]
    return ".".join(parts)


def validation_body(
    errors: Sequence[Any], skip: tuple[str, ...] = ("body", "query", "path", "header")
) -> ErrorBody:
    """422 (or 413 for a too-large field) naming the fields at fault."""
    items = []
    for e in errors:
        field = _dotted(e.get("loc", ()), skip)
        message = str(e.get("msg", "invalid"))
        if e.get("type") == "json_invalid":
            field, message = "", f"not valid JSON: {e.get('ctx', {}).get('error', message)}"
        if e.get("type") == UNENCODABLE:  # raised for the whole body; the context says where
            inner = str(e.get("ctx", {}).get("field", ""))
            field = ".".join(p for p in (field, inner) if p)
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        items.append(
            FieldError(field=field or "body", message=message, type=str(e.get("type", "")))
        )
    if not items:
        items.append(FieldError(field="body", message="invalid request", type="invalid"))
    too_large = any(i.type == TOO_LARGE for i in items)
    first = next((i for i in items if i.type == TOO_LARGE), items[0])
    return ErrorBody(
        status=413 if too_large else 422,
        error="too_large" if too_large else "invalid_request",
        message="; ".join(f"{i.field}: {i.message}" for i in items[:5]),
        field=first.field,
        errors=items,
    )


def error_response(body: ErrorBody) -> JSONResponse:
    headers = {}
    if body.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, math.ceil(body.retry_after_s)))
    return JSONResponse(
        body.model_dump(exclude_none=True), status_code=body.status, headers=headers
    )


_STATUS_NAMES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "too_large",
    415: "unsupported_media_type",
}


def install_error_handlers(app: FastAPI) -> None:
    async def on_api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.body())

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError | ValidationError)
        body = validation_body(exc.errors())
        content_type = request.headers.get("content-type", "")
        if request.method == "POST" and "json" not in content_type and body.field == "body":
            body.message = f"body: send JSON with Content-Type: application/json (not {content_type or 'none'})"
        return error_response(body)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        status = exc.status_code
        if status == 400:
            # FastAPI's "error parsing the body" (bytes that are not UTF-8, JSON nested
            # past the parser's depth): malformed, hence 422 like any other.
            return error_response(
                ErrorBody(
                    status=422,
                    error="invalid_request",
                    message="body: cannot be parsed as JSON",
                    field="body",
                )
            )
        body = ErrorBody(
            status=status,
            error=_STATUS_NAMES.get(status, "error"),
            message=str(exc.detail),
        )
        response = error_response(body)
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    async def on_recursion(request: Request, exc: Exception) -> JSONResponse:
        return error_response(
            ErrorBody(
                status=422, error="invalid_request", message="body: nested too deeply", field="body"
            )
        )

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(ValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RecursionError, on_recursion)


def log_internal(where: str, exc: BaseException) -> None:
    log.error("internal_error", exc_info=exc, extra=fields(where=where))
