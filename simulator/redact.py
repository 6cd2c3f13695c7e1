"""What logs may show of values that can hold a secret: request paths and webhook URLs.

Logs outlive the tenants they mention and are read by people who are not the tenant: a
public token in a hosted-flow path, or a credential a customer put in their endpoint's URL
(`https://user:pass@...`, `?token=...`), never reaches them. Spaces, the text log's
separator, are percent-encoded so a value cannot forge fields of its own.
"""

from __future__ import annotations

import re
from functools import lru_cache

REDACTED = "[redacted]"
# The path parameters that hold a secret, the one list of them: the hosted flow's config (a
# base64 JSON document that may hold the user's public token, slashes included), a public
# token being revoked, a processor token being revoked. Every operation whose path has one
# is redacted in logs (SECURITY.md: logs are read by people who are not the tenant).
SECRET_PARAMETERS = frozenset({"config", "publicToken", "token"})
_PARAMETER = re.compile(r"\{(\w+)\}")
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@]*@")


@lru_cache(maxsize=1)
def _secret_paths() -> tuple[re.Pattern[str], ...]:
    """One pattern per operation path with a secret parameter, up to that parameter: what
    precedes it is kept (group 1), the secret is not, what follows is kept (group 2), so a
    mistyped path after a token (`/access-token/<token>/revok`) hides the token too."""
    from .operations import AGGREGATOR, OPERATIONS  # the operations, once they are declared

    patterns = []
    for path in sorted({op.path for op in OPERATIONS}):
        secret = next((m for m in _PARAMETER.finditer(path) if m.group(1) in SECRET_PARAMETERS),
                      None)
        if secret is None:
            continue
        before = "/".join("[^/]+" if _PARAMETER.fullmatch(segment) or segment == AGGREGATOR
                          else re.escape(segment)
                          for segment in path[:secret.start()].split("/"))
        rest = secret.end() == len(path)  # the last parameter takes the rest (a config)
        patterns.append(re.compile(f"^({before})(?:{'.+' if rest else '[^/]+'})(.*)$", re.DOTALL))
    return tuple(patterns)


def loggable_path(path: str) -> str:
    """A request's path as logs show it: a secret parameter redacted, spaces encoded."""
    for pattern in _secret_paths():
        match = pattern.match(path)
        if match:
            path = f"{match.group(1)}{REDACTED}{match.group(2)}"
            break
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
