"""A small real HTTP server (starlette + uvicorn, in-process on 127.0.0.1) for poller tests.

It plays an older or broken SGLang: routes are plain callables returning (status, body).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.support.net import free_port

Handler = Callable[[], tuple[int, Any]]


def _route(path: str, handler: Handler) -> Route:
    async def endpoint(request: Request) -> Response:
        status, body = handler()
        if isinstance(body, (dict, list)):
            return JSONResponse(body, status_code=status)
        return PlainTextResponse(str(body), status_code=status)

    return Route(path, endpoint, methods=["GET"])


@contextlib.asynccontextmanager
async def serve(routes: dict[str, Handler]) -> AsyncIterator[str]:
    """Serve ``routes`` (path -> handler); yields the base URL; unknown paths are 404."""
    app = Starlette(routes=[_route(p, h) for p, h in routes.items()])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
