"""The API reference for people: /docs renders /openapi.json with Swagger UI.

Swagger UI's files (version 5: OpenAPI 3.1) come from the `swagger-ui-py` package,
installed with the sandbox; only its static files are used, served from here: nothing is
fetched from a CDN, so the page works offline and under the page's Content-Security-Policy.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from aiohttp import web

from ..operations import Auth, operation, serve_file, serve_script_and_styles

# The Swagger UI files the page loads, and their types: nothing else of the package is served.
ASSETS = {"swagger-ui.css": "text/css", "swagger-ui-bundle.js": "application/javascript"}
DOCS = {"auth": Auth.NONE, "tags": ("reference",)}


def _swagger_ui_files() -> Path:
    """swagger-ui-py's static folder, found without importing the package (its __init__
    loads Jinja and the framework handlers, none of which the sandbox needs)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise web.HTTPNotFound()
    return Path(next(iter(spec.submodule_search_locations))) / "static"


serve_file("/docs", "This API reference (Swagger UI)", "text/html", "docs.html",
           tags=DOCS["tags"])
serve_script_and_styles("/docs/docs", "reference page's", tags=DOCS["tags"])


def _serve_asset(name: str, content_type: str) -> None:
    """Declares GET /docs/assets/<name>: one of Swagger UI's files, with its own type."""

    async def asset() -> web.Response:
        body = (_swagger_ui_files() / name).read_bytes()
        # Swagger UI's files change only with the package: the browser may keep them a day.
        return web.Response(body=body, content_type=content_type,
                            headers={"cache-control": "public, max-age=86400"})

    asset.__name__ = f"docs_asset_{name.replace('-', '_').replace('.', '_')}"
    kind = "styles" if name.endswith(".css") else "script"
    operation("GET", f"/docs/assets/{name}", f"Swagger UI's {kind} ({name}), served locally",
              content_type=content_type, errors=(404,), **DOCS)(asset)


for _name, _type in ASSETS.items():
    _serve_asset(_name, _type)
