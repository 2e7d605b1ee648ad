"""``/docs``: Swagger UI for this API, every file served by the server itself.

Swagger UI's script and stylesheet come from the ``fastapi-offline`` package (which
ships them, so no CDN is reached at run time); the few lines that start it are a
file of ours (``backend/app/web/static/docs.js``), so the page's CSP allows no inline
script.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

from backend.app.web.middleware import content_security_policy

ASSETS = "/docs/assets"
_SWAGGER = Path(str(files("fastapi_offline") / "static"))
_START = Path(__file__).resolve().parents[1] / "web" / "static" / "docs.js"

PAGE = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>jaxplay API</title>
<link rel="stylesheet" href="{ASSETS}/swagger-ui.css">
<link rel="icon" href="{ASSETS}/favicon.png">
</head><body>
<div id="swagger-ui"></div>
<script src="{ASSETS}/swagger-ui-bundle.js"></script>
<script src="/docs/start.js"></script>
</body></html>
"""


def mount_docs(app: FastAPI, frame_ancestors: str) -> None:
    """Add ``/docs``, its starter script and Swagger UI's files to ``app``."""
    csp = content_security_policy(frame_ancestors)

    async def docs() -> HTMLResponse:
        return HTMLResponse(PAGE, headers={"Content-Security-Policy": csp})

    async def start() -> FileResponse:
        return FileResponse(_START, media_type="text/javascript")

    app.add_api_route("/docs", docs, include_in_schema=False)
    app.add_api_route("/docs/start.js", start, include_in_schema=False)
    app.mount(ASSETS, StaticFiles(directory=_SWAGGER), name="docs-assets")
