"""The built page's files (frontend/dist), served like a public site's.

- **Content-hashed assets** (``assets/<name>-<hash>.<ext>``, as Vite names them):
  ``Cache-Control: public, max-age=31536000, immutable``: a new build is new names,
  so a browser never asks for one of them twice.
- **Everything else** (``favicon.svg``...): ``Cache-Control: no-cache``, with the
  ``ETag`` and ``Last-Modified`` every file answer carries, so a repeat visit costs a
  ``304``.
- **Precompressed variants**: when ``<file>.br`` (or ``<file>.gz``) lies beside the
  file (scripts/build_frontend.sh makes them at build time, brotli at its best
  quality) and the client accepts that encoding, that file is sent with
  ``Content-Encoding`` and the original's type; the answer says ``Vary:
  Accept-Encoding``. Without one, backend/app/web/compression.py compresses on the fly.
"""

from __future__ import annotations

import mimetypes
import os
import re
import stat

import anyio.to_thread
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from backend.app.web.compression import add_vary, compressible, negotiate

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
#: a file Vite named by its content: assets/<name>-<8+ characters of hash>.<ext>
HASHED = re.compile(r"(?:^|/)assets/[^/]+-[A-Za-z0-9_-]{8,}\.[A-Za-z0-9]+$")
#: the precompressed variants looked for, best first
VARIANTS = (("br", ".br"), ("gzip", ".gz"))


def is_hashed(path: str) -> bool:
    return HASHED.search(path.replace(os.sep, "/")) is not None


class AssetFiles(StaticFiles):
    """StaticFiles with cache lifetimes and precompressed variants (module doc)."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await self._variant(path, scope)
        if response is None:
            response = await super().get_response(path, scope)
        headers = response.headers
        headers["cache-control"] = IMMUTABLE if is_hashed(path) else REVALIDATE
        media = mimetypes.guess_type(path)[0] or ""
        if compressible(media):
            add_vary(headers)
        return response

    async def _variant(self, path: str, scope: Scope) -> Response | None:
        """The precompressed file the client accepts, if one lies beside ``path``."""
        if scope["method"] not in ("GET", "HEAD") or path.endswith((".br", ".gz")):
            return None
        media = mimetypes.guess_type(path)[0]
        if media is None or not compressible(media):
            return None
        accepted = Headers(scope=scope).get("accept-encoding")
        for encoding, suffix in VARIANTS:
            if negotiate(accepted, (encoding,)) is None:
                continue
            try:
                full, found = await anyio.to_thread.run_sync(self.lookup_path, path + suffix)
            except (OSError, ValueError):
                return None
            if found is None or not stat.S_ISREG(found.st_mode):
                continue
            response = self.file_response(full, found, scope)
            if response.status_code != 304:  # a 304 has neither body nor its headers
                charset = "; charset=utf-8" if media.startswith("text/") else ""
                response.headers["content-type"] = media + charset
                response.headers["content-encoding"] = encoding
            return response
        return None
