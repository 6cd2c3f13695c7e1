"""/demo: a host page, as a customer's web app would be, that opens the hosted flow.

It holds no keys: it asks its own server for a public token (POST /demo/token, same
origin only), minted on the fixtures' `demo` tenant for a demo visitor. The page shows
the SDK's callbacks as they arrive and links to the dashboard.
"""

from __future__ import annotations

from aiohttp import web

from ..domain.tenants import create_access_token
from ..errors import Forbidden, TenantNotFound
from ..static import static_text
from .pipeline import NO_STORE, Auth, operation

DEMO_TENANT = "demo"
DEMO_VISITOR = "demo-visitor"
DEMO = {"auth": Auth.NONE, "tags": ("demo",)}
NO_DEMO = ("These fixtures have no `demo` account, which the demo page uses; add one to "
           "accounts.yaml or use the bundled fixtures.")
CROSS_ORIGIN = "The demo page's token is for the demo page only (same origin)."
TOKEN = {"type": "object", "required": ["publicToken", "identifier"],
         "properties": {"publicToken": {"type": "string"}, "identifier": {"type": "string"}}}


@operation("GET", "/demo", "A host page that opens the hosted flow (no keys in it)",
           content_type="text/html", **DEMO)
async def demo_page() -> web.Response:
    return web.Response(text=static_text("demo.html"), content_type="text/html",
                        headers=NO_STORE)


@operation("GET", "/demo/demo.js", "The demo page's script", content_type="application/javascript",
           **DEMO)
async def demo_script() -> web.Response:
    return web.Response(text=static_text("demo.js"), content_type="application/javascript",
                        headers=NO_STORE)


@operation("GET", "/demo/demo.css", "The demo page's styles", content_type="text/css", **DEMO)
async def demo_style() -> web.Response:
    return web.Response(text=static_text("demo.css"), content_type="text/css", headers=NO_STORE)


@operation("POST", "/demo/token", "A public token for the demo visitor of the `demo` tenant "
           "(the demo page's own origin only)", response=TOKEN, errors=(403, 404), **DEMO)
async def demo_token(request, sandbox) -> dict:
    if not _same_origin(request):
        raise Forbidden(CROSS_ORIGIN)
    tenant = sandbox.registry.tenants.get(DEMO_TENANT)
    if tenant is None:
        raise TenantNotFound(NO_DEMO)
    token = create_access_token(tenant, DEMO_VISITOR)
    return {"publicToken": token.public_token, "identifier": DEMO_VISITOR}


def _same_origin(request: web.Request) -> bool:
    """A browser says where a request comes from: Sec-Fetch-Site, and Origin on a POST."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        return False
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.scheme}://{request.host}"
