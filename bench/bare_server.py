"""A bare aiohttp server: the baseline of bench/startup.py and bench/throughput.py.

By default one POST route (/company/search) answering a fixed JSON body. With
`--responses FILE` (a JSON list of {"method", "path", "status", "content_type",
"headers", "body"}) it answers each listed request with exactly those bytes: what
bench/throughput.py captured from the sandbox. Every handler reads the request body,
as the sandbox does.

Bound to 127.0.0.1 on a free port, it announces itself on its first stdout line the
way `payroll-sandbox serve` does:

    bare-aiohttp serving http://127.0.0.1:<port>

It runs on the event loop `payroll-sandbox serve --loop` names (asyncio's own by
default, or uvloop), so a ratio against it compares the same loop kind, until SIGINT
or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Callable

from aiohttp import web


async def search(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response({"data": []})


def canned(status: int, content_type: str, headers: dict[str, str], body: bytes) -> Callable:
    """A handler answering the same bytes every time."""
    charset = None
    if ";" in content_type:  # web.Response takes the charset apart from the type
        content_type, _, params = content_type.partition(";")
        charset = params.strip().removeprefix("charset=") or None

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, status=status, content_type=content_type,
                            charset=charset, headers=headers)

    return answer


def build_app(responses: list[dict] | None) -> web.Application:
    app = web.Application()
    if responses is None:
        app.router.add_post("/company/search", search)
        return app
    for item in responses:
        handler = canned(item["status"], item["content_type"], item.get("headers", {}),
                         item["body"].encode())
        app.router.add_route(item["method"], item["path"], handler)
    return app


async def serve(host: str = "127.0.0.1", port: int = 0,
                responses: list[dict] | None = None) -> None:
    runner = web.AppRunner(build_app(responses), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    print(f"bare-aiohttp serving http://{bound_host}:{bound_port}", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def loop_factory(kind: str | None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The same choice as `payroll-sandbox serve --loop` (simulator/tools/cli.py)."""
    if kind != "uvloop":
        return None
    import uvloop

    return uvloop.new_event_loop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--responses", help="JSON file of the requests to answer and their bytes")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--loop", choices=["asyncio", "uvloop"],
                        help="event loop (default asyncio)")
    args = parser.parse_args(argv)
    responses = None
    if args.responses:
        with open(args.responses, encoding="utf-8") as file:
            responses = json.load(file)
    with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
        runner.run(serve(port=args.port, responses=responses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
