"""What a check-handler run is asked for, checked before anything starts: the URLs, the
event types, the secret deliveries are signed with. A CheckerError says in one line why
the arguments cannot make a run (the CLI exits 2 with it)."""

from __future__ import annotations

from collections.abc import Iterable

from ..client import default_credentials
from ..validate import http_url_problem


class CheckerError(ValueError):
    """The arguments cannot make a run (a bad URL, an unknown event type)."""


def default_secret() -> str:
    """The bundled default tenant's API secret: what that tenant's webhooks are signed
    with, as `listen` and `trigger` default to its keys."""
    return default_credentials()[1]


def url_problem(url: str, flag: str) -> str | None:
    """`<flag> '<url>'` and why it is not an http(s) URL a client can call; None when it is
    one (check-handler, listen and verify-against word their refusals so)."""
    problem = http_url_problem(url)
    if problem is None:
        return None
    return f"{flag} {url!r}{' ' if problem.startswith('is ') else ': '}{problem}"


def checked_url(url: str, flag: str) -> str:
    problem = url_problem(url, flag)
    if problem is not None:
        raise CheckerError(problem)
    return url


def names_of(value: Iterable[str] | str) -> set[str]:
    """Names given as a list or as one comma-separated string."""
    names = value.split(",") if isinstance(value, str) else list(value)
    return {n.strip() for n in names if n.strip()}


def checked_names(value: Iterable[str] | str, known: list[str], flag: str, noun: str) -> set[str]:
    """The names `flag` gives (names_of), each one of `known`; CheckerError otherwise."""
    wanted = names_of(value)
    unknown = sorted(wanted - set(known))
    if unknown:
        raise CheckerError(f"{flag}: no {noun} is named {', '.join(unknown)} "
                           f"(known: {', '.join(known)})")
    if not wanted:
        raise CheckerError(f"{flag} names no {noun}")
    return wanted


def select_types(events: Iterable[str] | str | None, known: list[str]) -> list[str]:
    """The event types to check: all, or the named ones in the spec's order."""
    if events is None:
        return list(known)
    wanted = checked_names(events, known, "--events", "event type")
    return [t for t in known if t in wanted]
