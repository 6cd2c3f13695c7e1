"""Processor links at /<aggregator>/... and the aggregator's token minting (control plane).

The aggregator's name comes from the service profile: the paths hold `<aggregator>`,
which the app fills in when it adds the routes.
"""

from __future__ import annotations

from ...clock import isoformat
from ...domain.links.processor_links import CLASSIFY, DETECT, ProcessorTokenRequest
from ...domain.shapes import view_of
from ...errors import ValidationFailed, field_detail
from ...schemas.api import ProcessorLinkRequest
from ...schemas.responses import (EmployerMatch, PROCESSING_RESULTS, ProcessorLink,
                                 ProcessorLinkRegistered, ProcessorLinksRemoved, ProcessorToken,
                                 RecurringTransaction, WebhookKey)
from ..operations import AGGREGATOR, CONTROL, Auth, Reply, operation
from ..examples import USER, Example, From

IDENTIFIER_HEADER = "user-identifier"
IDENTIFIER_REQUIRED = "Send the user-identifier header."
USER_HEADER = ((IDENTIFIER_HEADER, True),)
# The examples' user (/docs): the one POST /<aggregator>/processor-links's example named.
_AFTER_LINK = Example(parameters={IDENTIFIER_HEADER: USER}, after=From(
    "POST", f"/{AGGREGATOR}/processor-links",
    parameters={IDENTIFIER_HEADER: f"$request.header.{IDENTIFIER_HEADER}"}))


@operation("POST", f"/{AGGREGATOR}/processor-links", "Register a processor token (processing "
           "starts)", auth=Auth.API_KEYS, body=ProcessorLinkRequest, status=202,
           errors=(400, 404, 409, 429), headers=((IDENTIFIER_HEADER, False),),
           example=Example(
               {"processorToken": "processor-sandbox-0b5b3d5e-6a3f-4d7e-8f1a-3c2b1a0d9e8f"},
               after=From("POST", f"/_sandbox/{AGGREGATOR}/processor-token",
                          fields={"/processorToken": "$response.body#/data/processorToken"})))
async def register(tenant, body, headers, sandbox) -> ProcessorLinkRegistered:
    link = tenant.links.register(body.processor_token,
                                            headers.get(IDENTIFIER_HEADER))
    return ProcessorLinkRegistered(id=link.id, status=link.status)


@operation("DELETE", f"/{AGGREGATOR}/processor-links", "Remove a user's processor links "
           "(processing stops)", auth=Auth.API_KEYS, errors=(404,), headers=USER_HEADER,
           example=_AFTER_LINK)
async def remove(tenant, headers, sandbox) -> ProcessorLinksRemoved:
    links = tenant.links.remove_links(_identifier(headers))
    return ProcessorLinksRemoved(removed=[link.id for link in links])


@operation("GET", f"/{AGGREGATOR}/employer-matches", "A user's employer matches",
           auth=Auth.API_KEYS, envelope=PROCESSING_RESULTS, errors=(404,), headers=USER_HEADER,
           example=_AFTER_LINK)
async def employer_matches(tenant, headers, sandbox) -> Reply[list[EmployerMatch]]:
    return _results(tenant.links.results(_identifier(headers), CLASSIFY))


@operation("GET", f"/{AGGREGATOR}/recurring-transactions", "A user's recurring transactions",
           auth=Auth.API_KEYS, envelope=PROCESSING_RESULTS, errors=(404,),
           headers=USER_HEADER, example=_AFTER_LINK)
async def recurring_transactions(tenant, headers, sandbox) -> Reply[list[RecurringTransaction]]:
    return _results(tenant.links.results(_identifier(headers), DETECT))


def _results(document: dict) -> Reply:
    return Reply(document["data"], extra={"status": document["status"], "links": [
        view_of(ProcessorLink, link, created_at=isoformat(link.created_at),
                transactions=len(link.transactions)) for link in document["links"]]})


def _token(token) -> ProcessorToken:
    return view_of(ProcessorToken, token, processor_token=token.token,
                   products=list(token.products))


@operation("POST", f"/_sandbox/{AGGREGATOR}/processor-token", "Mint a processor token, as the "
           "aggregator would", body=ProcessorTokenRequest, status=201,
           errors=(429,), example=Example({"identifier": USER}), **CONTROL)
async def mint(tenant, body, sandbox) -> ProcessorToken:
    """What the aggregator's processor-token creation answers."""
    return _token(tenant.links.mint_token(body))


@operation("POST", f"/_sandbox/{AGGREGATOR}/processor-token/{{token}}/revoke", "Revoke a "
           "processor token at the aggregator", settles=True, errors=(404,), **CONTROL)
async def revoke(tenant, params, sandbox) -> ProcessorToken:
    return _token(tenant.links.revoke_token(params["token"]))


@operation("GET", f"/_sandbox/{AGGREGATOR}/webhook-verification-key", "The key that signs the "
           "aggregator's webhooks", **CONTROL)
async def webhook_key(tenant) -> WebhookKey:
    """The tenant's key pair at the aggregator (made when the tenant starts, kept in its
    snapshots): its id, which each webhook's Plaid-Verification JWT names as `kid`, and
    the public JWK /aggregator-api/webhook_verification_key/get serves for that id. A test
    reads the id here rather than from a webhook it has yet to receive."""
    key = tenant.aggregator.get_verification_key(tenant.aggregator.webhook_key.kid)["key"]
    return WebhookKey(key_id=key["kid"], key=key)


def _identifier(headers) -> str:
    identifier = headers.get(IDENTIFIER_HEADER)
    if not identifier:
        raise ValidationFailed(IDENTIFIER_REQUIRED, details=[
            field_detail(IDENTIFIER_HEADER, IDENTIFIER_REQUIRED, location="header")])
    return identifier
