"""A strict OpenAI-compatible server on 127.0.0.1, in a thread: it knows one model and little else.

It plays a real server that ``kimitui sweep`` must not mistake for a working one:
a chat completion naming any model but ``served`` is answered the way SGLang
and vLLM answer it (HTTP 404, an error object with the server's message);
``/flush_cache``, ``/server_info`` and ``/get_server_info`` do not exist (404),
and ``/metrics`` serves whatever text ``metrics`` holds (404 when None).
``hits`` counts requests by path.

    with StrictServer() as srv:
        main(["sweep", "--url", srv.url, "--model", "wrong", ...])
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import Counter
from types import TracebackType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route


class StrictServer:
    def __init__(self, served: str = "served-model", tick_s: float = 0.002, metrics: str | None = None) -> None:
        self.served = served
        self.tick_s = tick_s
        self.metrics = metrics
        self.hits: Counter[str] = Counter()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        app = Starlette(routes=[
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/metrics", self._metrics, methods=["GET"]),
            Route("/health", lambda r: PlainTextResponse(""), methods=["GET"]),
        ])

        async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.hits[scope["path"]] += 1
            await app(scope, receive, send)

        self._server = uvicorn.Server(uvicorn.Config(counted, host="127.0.0.1", port=self.port,
                                                     log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve()), daemon=True)

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": self.served, "object": "model"}]})

    async def _metrics(self, request: Request) -> Response:
        if self.metrics is None:
            return PlainTextResponse("Not Found", status_code=404)
        return PlainTextResponse(self.metrics, media_type="text/plain; version=0.0.4")

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        if body.get("model") != self.served:
            return JSONResponse({"object": "error", "message": f"The model `{body.get('model')}` does not exist.",
                                 "type": "NotFoundError", "param": "model", "code": 404}, status_code=404)
        n = int(body.get("max_tokens") or 16)

        async def stream() -> Any:
            def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> str:
                obj: dict[str, Any] = {"id": "x", "object": "chat.completion.chunk", "model": self.served,
                                       "choices": [] if usage else [{"index": 0, "delta": delta,
                                                                     "finish_reason": finish}]}
                if usage:
                    obj["usage"] = usage
                return "data: " + json.dumps(obj) + "\n\n"

            yield chunk({"role": "assistant", "content": ""})
            for _ in range(n):
                await asyncio.sleep(self.tick_s)
                yield chunk({"content": " tok"})
            yield chunk({"content": ""}, "length")
            yield chunk({}, usage={"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n})
            yield "data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    def start(self) -> StrictServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("strict server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> StrictServer:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
