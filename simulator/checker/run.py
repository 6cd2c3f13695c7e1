"""Running check-handler: the arguments checked, an event source (in-process, or a
running sandbox with `sandbox_url`), the suite in order, and the report."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterable
from typing import Any

from ..transport.dispatcher import ATTEMPT_TIMEOUT
from ..transport.sender import new_session
from ..validate import checked_url
from .arguments import CheckerError, default_secret, select_types
from .checks import BURST_CONCURRENCY, BURST_DELIVERIES, STATE_SETTLE, Suite
from .delivering import Deliverer
from .in_process import InProcessSource
from .remote import RemoteSource
from .report import Report

RUN_TIMEOUT = 300.0         # wall seconds for the whole run; later deliveries are not sent


def check_handler(url: str, secret: str | None = None, events: Iterable[str] | str | None = None,
                  state_url: str | None = None, **options: Any) -> Report:
    """Run every check against the webhook handler at `url` and return the report.

    `secret`: what the handler verifies `x-hmac-signature-sha-256` with; without it, the
    bundled default tenant's API secret (`default_secret()`), and the report says so first.
    `events`: only these event types (names or one comma-separated string).
    `state_url`: a URL answering the outcomes the handler stored: a list of
    `{"task", "status", "reason"}` or a mapping from task id to `{"status", "reason"}`,
    alone or under `"outcomes"` (state.py).
    `products`: the products whose tasks the handler deals with (names or one
    comma-separated string; default every one a task can be made for): task events name
    tasks of these only, and the state URL is judged on their outcomes only.
    `sandbox_url`, `api_key`, `api_secret`: make the events on that running sandbox, in a
    temporary tenant made with these keys (its vendor, event names, companies and
    scenarios), instead of an in-process one.
    `options`: `timeout` (per delivery, 15 s), `burst` (200), `concurrency` (20),
    `run_timeout` (300 s), `state_settle` (how long the state URL may take to show what
    it accepted, 5 s), `seed` (random). From a running event loop, await
    `check_handler_async` instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(check_handler_async(url, secret, events, state_url, **options))
    raise RuntimeError("check_handler() blocks: inside a running event loop, "
                       "await check_handler_async() instead")


async def check_handler_async(url: str, secret: str | None = None,
                              events: Iterable[str] | str | None = None,
                              state_url: str | None = None, *,
                              products: Iterable[str] | str | None = None,
                              sandbox_url: str | None = None, api_key: str | None = None,
                              api_secret: str | None = None,
                              timeout: float = ATTEMPT_TIMEOUT, burst: int = BURST_DELIVERIES,
                              concurrency: int = BURST_CONCURRENCY,
                              run_timeout: float = RUN_TIMEOUT,
                              state_settle: float = STATE_SETTLE,
                              seed: int | None = None) -> Report:
    """`check_handler`, awaitable."""
    url = checked_url(url, "URL", CheckerError)
    state_url = checked_url(state_url, "--state-url", CheckerError) if state_url else None
    if sandbox_url is not None:
        sandbox_url = checked_url(sandbox_url, "--url", CheckerError)
        if not (api_key and api_secret):
            raise CheckerError("--url needs --api-key and --api-secret: the keys of a tenant "
                               "of that sandbox")
    elif api_key is not None or api_secret is not None:
        raise CheckerError("--api-key and --api-secret are keys of a running sandbox: give "
                           "its --url too")
    if not (timeout > 0 and run_timeout > 0 and burst >= 1 and concurrency >= 1):
        raise CheckerError("timeout, run_timeout, burst and concurrency must be positive")
    started = time.monotonic()
    seed = secrets.randbits(31) if seed is None else seed
    signing = secret if secret is not None else default_secret()
    async with new_session(limit=concurrency) as session:
        source = (InProcessSource(seed) if sandbox_url is None
                  else RemoteSource(session, sandbox_url, api_key, api_secret, seed))
        async with source:
            selected = select_types(events, source.types)
            chosen = await source.select_products(products)
            deliverer = Deliverer(session, url, source.vendor, signing, timeout,
                                  deadline=started + run_timeout, run_timeout=run_timeout)
            suite = Suite(source, deliverer, selected, chosen, secret_given=secret is not None,
                          burst=burst, concurrency=concurrency, state_settle=state_settle)
            checks = [await suite.every_event_type(), await suite.wrong_signature(),
                      await suite.missing_signature(), await suite.duplicate_delivery(),
                      await suite.out_of_order(), await suite.unknown_event_type(),
                      await suite.extra_fields(), await suite.burst(), suite.no_redirect(),
                      await suite.state(state_url)]
    note = None
    if secret is None:
        note = (f"signing with the bundled default tenant's secret ({signing}), as its "
                "webhooks are signed; pass --secret with the one your handler verifies "
                "x-hmac-signature-sha-256 with if it is another")
    return Report(url=url, checks=tuple(checks), secret_given=secret is not None,
                  signing_note=note, event_types=tuple(selected), state_url=state_url,
                  seed=seed, elapsed_s=time.monotonic() - started, vendor=source.vendor,
                  sandbox_url=source.sandbox_url, cleanup_note=source.cleanup_note,
                  products=tuple(chosen), products_named=products is not None)
