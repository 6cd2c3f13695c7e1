"""One request to a running sandbox, for the commands that drive one from outside
(`listen`, `check-handler --url`): its status and its JSON, or why no answer came."""

from __future__ import annotations

import asyncio
from typing import Any


class CannotReach(Exception):
    """No answer came (refused, reset, timed out): the message says so in one line."""


async def request(session: Any, method: str, base: str, path: str, *, headers: dict[str, str],
                  timeout: float, json: Any = None,
                  params: dict[str, str] | None = None) -> tuple[int, Any]:
    """`method base+path` with `headers`, redirects not followed; the status and the body
    parsed as JSON (None when it is not JSON). Raises CannotReach naming `base`."""
    import aiohttp
    import orjson

    try:
        async with session.request(method, base + path, json=json, params=params,
                                   headers=headers, allow_redirects=False,
                                   timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            status, raw = response.status, await response.read()
    except asyncio.TimeoutError:
        raise CannotReach(f"cannot reach {base}: no answer to {method} {path} in "
                          f"{timeout:g}s") from None
    except aiohttp.ClientConnectorError as error:
        reason = ("connection refused" if isinstance(error.os_error, ConnectionRefusedError)
                  else str(error.os_error or error))
        raise CannotReach(f"cannot reach {base}: {reason}") from None
    except (aiohttp.ClientError, OSError) as error:
        raise CannotReach(f"cannot reach {base}: {error or type(error).__name__}") from None
    try:
        return status, orjson.loads(raw)
    except orjson.JSONDecodeError:
        return status, None
