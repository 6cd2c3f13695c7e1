"""The API reference for people: /docs renders /openapi.json with Swagger UI.

Swagger UI's files (version 5: OpenAPI 3.1) come from the `swagger-ui-py` package,
installed with the sandbox; only its static files are used, served from here: nothing is
fetched from a CDN, so the page works offline and under the page's Content-Security-Policy.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from aiohttp import web

from ...static import static_text
from ..operations import NO_STORE, Auth, operation

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
