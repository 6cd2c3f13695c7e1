"""The event loop in a thread that the blocking clients and receivers run on, and the guard
that refuses a blocking call on a thread whose own loop is running (BlockingCallError)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar


T = TypeVar("T")


class BlockingCallError(RuntimeError):
    """A blocking method was called on a thread whose event loop is running (an async
    test): it would hold up that loop, and any receiver or app served by it, until the
    call timed out. The message names the async twin to use instead."""


BLOCKING = ("{what} blocks, and it was called on a thread whose event loop is running "
            "(an async test?): nothing on that loop (your app, a receiver) could answer until "
            "it timed out. Use {twin} instead, awaited: `await {example}`.")


def refuse_on_a_running_loop(what: str, twin: str, example: str) -> None:
    """Raises BlockingCallError at once when this thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # no loop here: blocking is fine
    raise BlockingCallError(BLOCKING.format(what=what, twin=twin, example=example))


class LoopThread:
    """An event loop running in a daemon thread, for servers a sync test uses."""

    def __init__(self, name: str = "payroll-sandbox-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(60)
        if self._error is not None:
            raise self._error

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = 60) -> T:
        """Runs `coroutine` on the loop, from another thread, and returns its result; when
        the wait ends without it (a timeout, Ctrl-C), the coroutine is cancelled."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    async def _setup(self) -> None:
        """Runs on the loop before start() returns (a server's start-up)."""

    async def _cleanup(self) -> None:
        """Runs on the loop when stop() is called."""

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._setup())
        except BaseException as error:  # reported to the starting thread
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        if self._thread.is_alive() and self._error is None:
            self.run(self._cleanup(), 30)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)
        self.loop.close()
