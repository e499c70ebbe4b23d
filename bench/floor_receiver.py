"""The floor for the webhook benchmark: aiohttp + gidgethub verify, parse and route; no storage.

It answers as fast as a receiver can that does no durable work, so the real server's figures
can be read against it. Run: ``python bench/floor_receiver.py PORT SECRET``.
"""

from __future__ import annotations

import sys

from aiohttp import web
from gidgethub import routing, sansio

router = routing.Router()
routed = 0


@router.register("pull_request")
async def count(event: sansio.Event) -> None:
    global routed
    routed += 1


async def receive(request: web.Request) -> web.Response:
    body = await request.read()
    event = sansio.Event.from_http(request.headers, body, secret=request.app["secret"])
    await router.dispatch(event)
    return web.json_response({"status": "queued"}, status=202)


def main() -> None:
    port, secret = int(sys.argv[1]), sys.argv[2]
    app = web.Application(client_max_size=25 * 1024 * 1024)
    app["secret"] = secret
    app.router.add_post("/api/github/webhooks", receive)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


if __name__ == "__main__":
    main()
