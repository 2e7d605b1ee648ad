"""Structured logs: one JSON object per line on stderr (or plain text for a terminal).

Call sites log a short event name and fields, never user code (its hash at most):
``log.info("run.done", extra={"fields": {"run_id": ..., "status": ...}})``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from sandbox.queue.redact import redact_url

__all__ = ["fields", "get_logger", "redact_url"]

LOGGER = "jaxplay"


def get_logger(name: str = "") -> logging.Logger:
    return logging.getLogger(f"{LOGGER}.{name}" if name else LOGGER)


def fields(**values: Any) -> dict[str, Any]:
    """``extra=fields(run_id=..., ...)``: the structured part of a log line."""
    return {"fields": values}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        line.update(getattr(record, "fields", {}))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        extra = " ".join(f"{k}={v}" for k, v in getattr(record, "fields", {}).items())
        text = f"{stamp} {record.levelname.lower():7} {record.name} {record.getMessage()} {extra}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text.rstrip()


def configure_logging(level: str = "info", fmt: str = "json") -> None:
    """Route jaxplay's, its sandbox's (the pools, zygotes and jails: why a sandbox
    retired, what a run's jail said) and uvicorn's logs through one handler on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    for name in (LOGGER, "sandbox", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False
    # Access lines come from our own middleware, with the route and timing.
    logging.getLogger("uvicorn.access").disabled = True
