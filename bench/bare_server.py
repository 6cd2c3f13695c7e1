"""A bare aiohttp server: the startup baseline for bench/startup.py.

One POST route (/company/search) answering a fixed JSON body, bound to
127.0.0.1 on a free port, announcing itself on its first stdout line the way
`payroll-sandbox serve` does:

    bare-aiohttp serving http://127.0.0.1:<port>

It runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal

from aiohttp import web


async def search(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response({"data": []})


async def serve(host: str = "127.0.0.1", port: int = 0) -> None:
    app = web.Application()
    app.router.add_post("/company/search", search)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
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


if __name__ == "__main__":
    asyncio.run(serve())
