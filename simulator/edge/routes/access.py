"""POST /access-token: public tokens for a user (DESIGN.md, Public API); revoking one at the
real service's path (docs/spec/real-api-surface.md, Access tokens)."""

from __future__ import annotations

from ...domain.identity.identity import token_record
from ...schemas.api import SUCCEEDED, AccessToken, AccessTokenRequest, Success
from ..operations import Auth, operation
from ..examples import USER, Example


@operation("POST", "/access-token", "Create a user's public token (and the user, if new)",
           auth=Auth.API_KEYS, body=AccessTokenRequest, errors=(400, 429),
           example=Example({"identifier": USER}))
async def access_token(tenant, body) -> AccessToken:
    token = tenant.identity.create_access_token(body.identifier, body.token_lifetime)
    return token_record(token)


@operation("PUT", "/access-token/{publicToken}/revoke", "Revoke a public token at once",
           auth=Auth.API_KEYS, errors=(404,))
async def revoke(tenant, params) -> Success:
    tenant.identity.revoke(params["publicToken"])
    return SUCCEEDED
