"""What logs may show of values that can hold a secret: webhook URLs (and, for logs.py,
the redaction mark and the space encoding of request paths).

Logs outlive the tenants they mention and are read by people who are not the tenant: a
public token in a hosted-flow path, or a credential a customer put in their endpoint's URL
(`https://user:pass@...`, `?token=...`), never reaches them. Spaces, the text log's
separator, are percent-encoded so a value cannot forge fields of its own.
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@]*@")


def loggable_url(url: str) -> str:
    """A webhook URL as logs show it: without user information, query or fragment."""
    url = _USERINFO.sub(rf"\g<1>{REDACTED}@", url)
    for mark in ("?", "#"):
        if mark in url:
            url = url.split(mark, 1)[0] + f"{mark}{REDACTED}"
    return spaces_encoded(url)


def spaces_encoded(text: str) -> str:
    return text.replace(" ", "%20") if " " in text else text
