"""What keeps a sandbox safe from the web pages its users visit and from its neighbours on a
shared deployment (SECURITY.md): which Host names it answers, which answers a browser on
another origin may read (CORS), and the headers of its pages.

The edge middleware asks; nothing here touches a tenant.
"""

from __future__ import annotations

import ipaddress

from .settings import Settings

LOOPBACK_NAMES = ("localhost",)
WILDCARD = "*"

# Every answer: a browser never guesses a type other than the one given.
NOSNIFF = ("x-content-type-options", "nosniff")

# The pages load only their own scripts, styles and data; company logos may come from
# anywhere over http(s) or data: URLs.
_PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                "img-src 'self' data: https: http:; font-src 'self'; frame-src 'self'; "
                "base-uri 'none'; form-action 'self'; frame-ancestors {ancestors}")


class HostPolicy:
    """The Host names a request may carry (a DNS-rebinding page carries its own name).

    Always allowed: IP literals (rebinding needs a name) and localhost (`*.localhost`
    resolves to loopback only). Besides those: `--allowed-host` names; `*` allows any.
    Every request asks, so the answer for each Host header seen is kept (CACHE of them).
    """

    CACHE = 256

    def __init__(self, names: frozenset[str], any_name: bool) -> None:
        self.names = names
        self.any_name = any_name
        self._seen: dict[str, bool] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> HostPolicy:
        names = {n.strip().lower().rstrip(".") for n in settings.allowed_hosts.split(",")}
        names.discard("")
        return cls(names=frozenset(names - {WILDCARD}), any_name=WILDCARD in names)

    def allows(self, host_header: str | None) -> bool:
        if self.any_name:
            return True
        if not host_header:
            return False  # HTTP/1.1 requires one; a browser always sends it
        known = self._seen.get(host_header)
        if known is None:
            known = self._judge(_host_name(host_header))
            if len(self._seen) < self.CACHE:
                self._seen[host_header] = known
        return known

    def _judge(self, name: str) -> bool:
        if name in self.names or name in LOOPBACK_NAMES or name.endswith(".localhost"):
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True


def _host_name(host_header: str) -> str:
    """`Host: name:port` or `[v6]:port` -> the name, lower case, without a final dot."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def page_headers(frame_ancestors: str) -> dict[str, str]:
    """The headers of an HTML page: its Content-Security-Policy, framed only by
    `frame_ancestors` (`'none'` for the dashboard), and no Referer sent from it."""
    headers = {"content-security-policy": _PAGE_POLICY.format(ancestors=frame_ancestors),
               "referrer-policy": "no-referrer"}
    if frame_ancestors == "'none'":
        headers["x-frame-options"] = "DENY"  # for browsers without frame-ancestors
    return headers
