"""The API reference for people: /docs renders /openapi.json with Swagger UI.

Swagger UI's files (version 5: OpenAPI 3.1) come from the `swagger-ui-py` package,
installed with the sandbox; only its static files are used, served from here: nothing is
fetched from a CDN, so the page works offline and under the page's Content-Security-Policy.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from aiohttp import web

from ..static import static_text
from .pipeline import NO_STORE, Auth, operation

# The Swagger UI files the page loads, and their types: nothing else of the package is served.
ASSETS = {"swagger-ui.css": "text/css", "swagger-ui-bundle.js": "application/javascript",
          "swagger-ui-standalone-preset.js": "application/javascript"}
DOCS = {"auth": Auth.NONE, "tags": ("reference",)}


def _swagger_ui_files() -> Path:
    """swagger-ui-py's static folder, found without importing the package (its __init__
    loads Jinja and the framework handlers, none of which the sandbox needs)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise web.HTTPNotFound()
    return Path(next(iter(spec.submodule_search_locations))) / "static"


@operation("GET", "/docs", "This API reference (Swagger UI)",
           content_type="text/html", **DOCS)
async def docs_page() -> web.Response:
    return web.Response(text=static_text("docs.html"), content_type="text/html",
                        headers=NO_STORE)


@operation("GET", "/docs/docs.js", "The reference page's script",
           content_type="application/javascript", **DOCS)
async def docs_script() -> web.Response:
    return web.Response(text=static_text("docs.js"), content_type="application/javascript",
                        headers=NO_STORE)


@operation("GET", "/docs/docs.css", "The reference page's styles",
           content_type="text/css", **DOCS)
async def docs_style() -> web.Response:
    return web.Response(text=static_text("docs.css"), content_type="text/css", headers=NO_STORE)


@operation("GET", "/docs/assets/{name}", "Swagger UI's files, served locally",
           content_type="application/octet-stream", errors=(404,), **DOCS)
async def docs_asset(params) -> web.Response:
    name = params["name"]
    if name not in ASSETS:
        raise web.HTTPNotFound()
    body = (_swagger_ui_files() / name).read_bytes()
    # Swagger UI's files change only with the package: the browser may keep them a day.
    return web.Response(body=body, content_type=ASSETS[name],
                        headers={"cache-control": "public, max-age=86400"})
