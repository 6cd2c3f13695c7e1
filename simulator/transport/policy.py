"""Where webhooks may go: the outbound policy (issue 22; SECURITY.md, Outbound webhooks).

A tenant chooses its endpoints' URLs and reads back each attempt's status and latency, so in
a deployment shared by several teams a webhook endpoint is a probe. By default the sandbox
refuses, as targets:
- link-local addresses (169.254.0.0/16, fe80::/10), where cloud metadata services answer,
  and the other well-known metadata addresses and names;
- its own listening addresses and port (its control plane), but for exactly one target:
  its built-in demo receiver (RECEIVER_PATH, routes/demo.py), at its own literal address or
  at RECEIVER_HOST, a name only this policy resolves (to the address the sandbox listens
  on), which the fixtures' `demo` account uses because no fixture knows the port.
Loopback and private addresses stay allowed: local receivers are the main use.
`--webhook-deny` (CIDRs or host names, `*.example.com` too) refuses more; `--webhook-allow`
allows what the defaults refuse (never the sandbox itself). The check runs at registration
(on the URL's host: a name or a literal address) and again at delivery on every address the
name resolves to, so a name that resolves somewhere refused is refused too (DNS
rebinding). A refused attempt never connects: its recorded error is the same whatever
listens there, so a refused port cannot be told from a closed one.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import yarl
from aiohttp.abc import AbstractResolver

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

REFUSED = "refused by the sandbox's outbound policy ({why}); see --webhook-allow"
LINK_LOCAL = "a link-local or metadata address"
ITSELF = "the sandbox's own address"
DENIED = "denied by --webhook-deny"
NOT_LISTENING = "{host} is the sandbox itself, which is not listening yet"

# The one target on the sandbox itself: its demo receiver (POST /demo/webhooks), by POST
# over plain http, that path exactly (no query). RECEIVER_HOST names the sandbox wherever
# it listens (`.localhost`, so the sandbox's Host check lets it in); any other path on it,
# or on the sandbox's own address, is refused as the sandbox itself.
RECEIVER_PATH = "/demo/webhooks"
RECEIVER_HOST = "payroll-sandbox.localhost"
RECEIVER_URL = f"http://{RECEIVER_HOST}{RECEIVER_PATH}"

_DEFAULT_DENY: tuple[Network, ...] = tuple(ipaddress.ip_network(n) for n in (
    "169.254.0.0/16",       # link-local; 169.254.169.254 is AWS, GCP, Azure, OpenStack metadata
    "fe80::/10",            # IPv6 link-local
    "fd00:ec2::254/128",    # AWS metadata over IPv6
    "100.100.100.200/32",   # Alibaba Cloud metadata
))
_DEFAULT_DENY_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
KEPT_URLS = 1024  # answers of attempt_problem kept


class OutboundRefused(OSError):
    """An attempt the policy refused before connecting (its message is the recorded error)."""


class Rules(msgspec.Struct, frozen=True):
    """Networks and host names (`name` exactly, `*.name` its subdomains)."""

    networks: tuple[Network, ...] = ()
    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str], source: str) -> Rules:
        """Rules from `--webhook-allow`/`--webhook-deny` values, blank ones skipped
        (ValueError naming the bad one)."""
        networks, names, suffixes = [], set(), []
        for entry in (e.strip().lower().rstrip(".") for e in entries):
            if not entry:
                continue
            try:
                networks.append(_unmapped_network(ipaddress.ip_network(entry, strict=False)))
                continue
            except ValueError:
                pass
            bare = entry[2:] if entry.startswith("*.") else entry
            if not bare or any(c in bare for c in "/:@ ") or bare.startswith("."):
                raise ValueError(f"{source}: {entry!r} is neither an address, a network (CIDR) "
                                 "nor a host name")
            if entry.startswith("*."):
                suffixes.append("." + bare)
            else:
                names.add(bare)
        return cls(tuple(networks), frozenset(names), tuple(suffixes))

    def has_name(self, host: str) -> bool:
        return host in self.names or host.endswith(self.suffixes)

    def has_address(self, address: Address) -> bool:
        address = _unmapped(address)  # ::ffff:a.b.c.d is judged as a.b.c.d by every rule
        return any(address in network for network in self.networks
                   if network.version == address.version)


@dataclass
class OutboundPolicy:
    """Where webhooks may go: the allow and deny rules and the server's own address."""

    allow: Rules = field(default_factory=Rules)
    deny: Rules = field(default_factory=Rules)
    # (address, port) this server listens on; an unspecified address (0.0.0.0, ::) means
    # every local address at that port. Filled in once it listens (server.start_site).
    listening: set[tuple[Address, int]] = field(default_factory=set)
    # url_problem of the URLs attempts went to (a tenant's go to a few): forgotten when the
    # listening addresses change, and past KEPT_URLS.
    _refusals: dict[str, str | None] = field(default_factory=dict, init=False, repr=False,
                                             compare=False)

    @classmethod
    def from_settings(cls, settings: Any) -> OutboundPolicy:
        return cls(allow=Rules.parse(settings.webhook_allow.split(","), "--webhook-allow"),
                   deny=Rules.parse(settings.webhook_deny.split(","), "--webhook-deny"))

    def serving(self, addresses: Iterable[Any]) -> None:
        """The server listens at `addresses` (aiohttp's runner.addresses)."""
        self._refusals.clear()
        for address in addresses:
            host, port = address[0], address[1]
            try:
                self.listening.add((ipaddress.ip_address(host), int(port)))
            except ValueError:
                continue

    def url_problem(self, url: Any) -> str | None:
        """Why a webhook URL (a yarl.URL) is refused, at registration and before each
        attempt: its host (a name, or a literal address), except the built-in demo receiver,
        which is on the sandbox itself (RECEIVER_PATH at RECEIVER_HOST or at its own literal
        address)."""
        host = (url.host or "").strip("[]").lower().rstrip(".")
        port = url.port or 0
        receiver = url.scheme == "http" and url.path == RECEIVER_PATH and not url.query_string
        if self.deny.has_name(host):
            return REFUSED.format(why=DENIED)
        if host == RECEIVER_HOST:
            return None if receiver else REFUSED.format(why=ITSELF)
        try:
            address = _unmapped(ipaddress.ip_address(host))
        except ValueError:  # a name: what it resolves to is judged at delivery (PolicyResolver)
            if host in _DEFAULT_DENY_NAMES and not self.allow.has_name(host):
                return REFUSED.format(why=LINK_LOCAL)
            return None
        if receiver and self._is_itself(address, port) and not self.deny.has_address(address):
            return None
        return self.address_problem(address, port)

    def attempt_problem(self, url: str) -> str | None:
        """url_problem of a URL as an attempt is about to go to it, worked out once per URL
        (parsing it and probing for local addresses was a tenth of an attempt's cost)."""
        if url not in self._refusals:
            if len(self._refusals) >= KEPT_URLS:
                self._refusals.clear()
            self._refusals[url] = self.url_problem(yarl.URL(url))
        return self._refusals[url]

    def own_addresses(self) -> list[tuple[str, int]]:
        """(address, port) to reach this sandbox at, loopback first: where RECEIVER_HOST
        resolves (an unspecified listening address is reached over loopback)."""
        return list(dict.fromkeys(  # in that order, each once
            (str(_LOOPBACK[address.version] if address.is_unspecified else address), port)
            for address, port in sorted(self.listening, key=_loopback_first)))

    def address_problem(self, address: Address, port: int) -> str | None:
        """Why an address (a literal one, or one a name resolved to) is refused. A "this
        host" address (0.0.0.0/8, ::, or either mapped into IPv6) connects to the loopback
        on Linux: every rule reads it as the loopback as well as itself."""
        address = _unmapped(address)
        reached = _this_host_reaches(address)
        if any(self._is_itself(each, port) for each in reached):
            return REFUSED.format(why=ITSELF)
        if any(self.deny.has_address(each) for each in reached):
            return REFUSED.format(why=DENIED)
        if self.allow.has_address(address):
            return None
        if any(address in network for network in _DEFAULT_DENY
               if network.version == address.version):
            return REFUSED.format(why=LINK_LOCAL)
        return None

    def _is_itself(self, address: Address, port: int) -> bool:
        for listening, listening_port in self.listening:
            if port != listening_port:
                continue
            if listening == address:
                return True
            if listening.is_unspecified and (address.is_loopback or address.is_unspecified
                                             or _is_local(address)):
                return True
            if listening.is_loopback and address.is_loopback:
                return True  # 127.0.0.1 and 127.0.0.2 reach the same loopback listener
        return False


_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")  # RFC 1122: "this host on this network"
_LOOPBACK = {4: ipaddress.ip_address("127.0.0.1"), 6: ipaddress.ip_address("::1")}


def _this_host_reaches(address: Address) -> tuple[Address, ...]:
    """The addresses a connection to `address` may reach: a "this host" address reaches the
    loopback (a connect to 0.0.0.0 or :: lands on 127.0.0.1 or ::1)."""
    if address.is_unspecified or (address.version == 4 and address in _THIS_NETWORK):
        return (address, _LOOPBACK[address.version])
    return (address,)


def _loopback_first(pair: tuple[Address, int]) -> tuple[bool, int, str]:
    address = pair[0]
    return not (address.is_loopback or address.is_unspecified), address.version, str(address)


def _unmapped(address: Address) -> Address:
    """::ffff:a.b.c.d is a.b.c.d."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


_MAPPED = ipaddress.ip_network("::ffff:0:0/96")


def _unmapped_network(network: Network) -> Network:
    """::ffff:a.b.c.d/(96 + n) is a.b.c.d/n: a rule reads as the addresses it is judged on."""
    if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_MAPPED):
        return ipaddress.ip_network(f"{network.network_address.ipv4_mapped}/"
                                    f"{network.prefixlen - 96}")
    return network


def _is_local(address: Address) -> bool:
    """One of this machine's own addresses (bindable)."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((str(address), 0))
        return True
    except OSError:
        return False


class PolicyResolver(AbstractResolver):
    """aiohttp's resolver, with every resolved address the policy refuses left out; none
    left raises OutboundRefused (the attempt never connects)."""

    def __init__(self, policy: OutboundPolicy) -> None:
        from aiohttp.resolver import DefaultResolver

        self.policy = policy
        self._resolver = DefaultResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: int = socket.AF_INET) -> list[dict[str, Any]]:
        name = host.lower().rstrip(".")
        if self.policy.deny.has_name(name):
            raise OutboundRefused(REFUSED.format(why=DENIED))
        if name == RECEIVER_HOST:  # url_problem let only the receiver's path through
            return self._itself(host)
        resolved = await self._resolver.resolve(host, port, family)
        kept, why = [], None
        for entry in resolved:
            try:
                address = ipaddress.ip_address(entry["host"])
            except ValueError:
                kept.append(entry)
                continue
            problem = self.policy.address_problem(address, int(entry.get("port") or port))
            if problem is None:
                kept.append(entry)
            else:
                why = why or problem
        if not kept:
            raise OutboundRefused(why or REFUSED.format(why=DENIED))
        return kept

    def _itself(self, host: str) -> list[dict[str, Any]]:
        own = self.policy.own_addresses()
        if not own:
            raise OutboundRefused(NOT_LISTENING.format(host=RECEIVER_HOST))
        return [{"hostname": host, "host": address, "port": port,
                 "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST} for address, port in own]

    async def close(self) -> None:
        await self._resolver.close()
