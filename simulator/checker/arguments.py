"""What a check-handler run is asked for, checked before anything starts: the URLs, the
event types, the secret deliveries are signed with. A CheckerError says in one line why
the arguments cannot make a run (the CLI exits 2 with it)."""

from __future__ import annotations

from collections.abc import Iterable

from ..client import default_credentials
from ..validate import names_of


class CheckerError(ValueError):
    """The arguments cannot make a run (a bad URL, an unknown event type)."""


def default_secret() -> str:
    """The bundled default tenant's API secret: what that tenant's webhooks are signed
    with, as `listen` and `trigger` default to its keys."""
    return default_credentials()[1]


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
