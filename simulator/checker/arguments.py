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


def checked_url(url: str, flag: str, error: type[Exception] = CheckerError) -> str:
    """`url` when it is an http(s) URL a client can call; else `error` saying `<flag>
    '<url>'` and why (check-handler, listen and verify-against word their refusals so)."""
    problem = http_url_problem(url)
    if problem is not None:
        raise error(f"{flag} {url!r}{' ' if problem.startswith('is ') else ': '}{problem}")
    return url


def names_of(value: Iterable[str] | str) -> set[str]:
    """Names given as one comma-separated string, or a list of them (a repeatable flag:
    --events a,b --events c)."""
    items = [value] if isinstance(value, str) else value
    return {name.strip() for item in items for name in item.split(",") if name.strip()}


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
