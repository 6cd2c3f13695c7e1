"""The client SDK's hosted flow: its configuration and the sandbox login.

The flow is configured by the customer's page (spec: Client SDK configuration) and
talks to the sandbox with the user's public token. Logging in with a sandbox
username starts a real task, driven by its scenario (DESIGN.md, Scenarios):
`test-good` is the happy path, `test-bad` bad credentials, `test-<scenario>` any
scenario; other usernames are accepted as good credentials.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ..errors import ApiError, BadRequest, Forbidden, ValidationFailed, field_detail
from .companies import DISABLED, Company
from .tasks import HAPPY_PATH, TaskEngine
from .tenants import PublicToken, Tenant

DEEPLINK_STEPS = ("login-company", "search-company", "search-payroll", "welcome", "account",
                  "direct-deposit-setup", "manual-fallback", "generate-deposit-pdf", "add-card")
STEPS_NEEDING_COMPANY = ("login-company", "direct-deposit-setup", "manual-fallback",
                         "generate-deposit-pdf")
USERNAMES = {"test-good": HAPPY_PATH, "test-bad": "bad-credentials"}

INVALID_CONFIG = "The SDK configuration is not base64 of a JSON object."
INVALID_COMPANY_ID = "The deeplink names no company with that _id (invalid-company-id)."


class InvalidCompanyId(ApiError):
    status = 404
    code = "invalid-company-id"


def decode_config(encoded: str) -> dict[str, Any]:
    """The configuration from /initialize/{base64 of JSON} (URL-safe or not, padded or not)."""
    text = encoded.replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        config = json.loads(raw)
    except (binascii.Error, ValueError):
        raise BadRequest(INVALID_CONFIG, code="invalid-config",
                         details=[field_detail("$", INVALID_CONFIG, location="path")]) from None
    if not isinstance(config, dict):
        raise BadRequest(INVALID_CONFIG, code="invalid-config",
                         details=[field_detail("$", INVALID_CONFIG, location="path")])
    return config


def deeplink_company(tenant: Tenant, config: dict[str, Any]) -> Company | None:
    """The deeplinked company, or the invalid-company-id condition (spec: API and SDK
    errors 3): the id must be non-empty and be a company's `_id`."""
    deeplink = config.get("deeplink") or {}
    step = deeplink.get("step")
    if step not in STEPS_NEEDING_COMPANY and "companyId" not in deeplink:
        return None
    company_id = deeplink.get("companyId")
    company = tenant.companies.get(company_id) if isinstance(company_id, str) and company_id else None
    if company is None or company.status == DISABLED and step == "login-company":
        raise InvalidCompanyId(INVALID_COMPANY_ID,
                               details=[field_detail("$.deeplink.companyId", "not a company _id")])
    return company


def scenario_for_username(engine: TaskEngine, username: str) -> str | None:
    if username in USERNAMES:
        return USERNAMES[username]
    if username.startswith("test-"):
        name = username[len("test-"):]
        scenario = engine.scenarios.get(name)
        if scenario is not None and scenario.kind == "task":
            return name
    return None


def login(engine: TaskEngine, tenant: Tenant, token: PublicToken, body: dict[str, Any]):
    """POST /sdk/login: the user's credentials at a company start the configured tasks."""
    company = tenant.companies.get(body["companyId"])
    if company is None:
        raise InvalidCompanyId(INVALID_COMPANY_ID,
                               details=[field_detail("$.companyId", "not a company _id")])
    if company.status == DISABLED:
        raise Forbidden(f"{company.name} is disabled: signing in is not possible.",
                        code="company-disabled", details=[field_detail("$.companyId", "disabled")])
    operations = body.get("tasks") or [{"operation": _default_operation(company)}]
    request: dict[str, Any] = {"company": company.id, "tasks": operations}
    for name in ("metadata", "paymentMethod"):
        if name in body:
            request[name] = body[name]
    if "paymentMethod" in body:
        request["tasks"] = [{**t, "paymentMethod": body["paymentMethod"]} for t in operations]
        del request["paymentMethod"]
    if body.get("linkedAccount"):
        account = engine.linked_accounts.require(tenant, body["linkedAccount"], "$.linkedAccount")
        if account.company_id != company.id or account.identifier != token.identifier:
            raise ValidationFailed("The linked account is not this user's at this company.",
                                   details=[field_detail("$.linkedAccount", "not this user's")])
    return engine.create_task(tenant, request, token_identifier=token.identifier,
                              public_token=token.public_token,
                              login_scenario=scenario_for_username(engine, body["username"]))


def _default_operation(company: Company) -> str:
    for operation in ("deposit", "verify", "switch", "present"):
        if operation in company.available_products:
            return operation
    return company.available_products[0]


def deposit_form_pdf(employer: str, identifier: str, today: Any) -> bytes:
    """A one-page PDF: the direct deposit authorization a user hands to the employer.

    Written directly (a PDF page of text is a few objects), to keep a PDF library out of
    the dependencies for one form.
    """
    def text(value: str) -> str:
        return value.encode("latin-1", "replace").decode("latin-1").replace("\\", "\\\\") \
            .replace("(", "\\(").replace(")", "\\)")

    lines = [(18, "Direct Deposit Authorization"), (12, f"Employer: {employer}"),
             (12, f"Employee: {identifier}"), (12, f"Date: {today.isoformat()}"), (12, ""),
             (12, "Bank name: ______________________________"),
             (12, "Routing number: _________________________"),
             (12, "Account number: _________________________"),
             (12, "Account type:  [ ] checking   [ ] savings"),
             (12, "Amount:  [ ] entire paycheck   [ ] ____ %   [ ] $ ______"), (12, ""),
             (12, "Signature: ______________________________")]
    content = "BT /F1 12 Tf 72 740 Td 18 TL\n" + "".join(
        f"/F1 {size} Tf ({text(line)}) Tj T*\n" for size, line in lines) + "ET"
    objects = ["<< /Type /Catalog /Pages 2 0 R >>",
               "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
               "/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
               f"<< /Length {len(content.encode('latin-1'))} >>\nstream\n{content}\nendstream",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out
