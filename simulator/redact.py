"""What logs may show of values that can hold a secret: request paths and webhook URLs.

Logs outlive the tenants they mention and are read by people who are not the tenant: a
public token in a hosted-flow path, or a credential a customer put in their endpoint's URL
(`https://user:pass@...`, `?token=...`), never reaches them. Spaces, the text log's
separator, are percent-encoded so a value cannot forge fields of its own.
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"
# Paths that carry a secret in a segment of their own: the hosted flow's config (a base64
# JSON document) holds the user's public token; a token's revocation names the token.
_SECRET_SEGMENT = re.compile(r"^(/initialize/|/access-token/)[^/]+")
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@]*@")


def loggable_path(path: str) -> str:
    """A request's path as logs show it: a secret segment redacted, spaces encoded."""
    if path.startswith(("/initialize/", "/access-token/")):
        path = _SECRET_SEGMENT.sub(rf"\g<1>{REDACTED}", path)
    return _spaces(path)


def loggable_url(url: str) -> str:
    """A webhook URL as logs show it: without user information, query or fragment."""
    url = _USERINFO.sub(rf"\g<1>{REDACTED}@", url)
    for mark in ("?", "#"):
        if mark in url:
            url = url.split(mark, 1)[0] + f"{mark}{REDACTED}"
    return _spaces(url)


def _spaces(text: str) -> str:
    return text.replace(" ", "%20") if " " in text else text
