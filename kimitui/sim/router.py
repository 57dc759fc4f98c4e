"""A simulated SGLang PD router: ``python -m kimitui.sim.router --pd-disaggregation --prefill URL [PORT] --decode URL``.

It mirrors ``python -m sglang_router.launch_router --pd-disaggregation --prefill URL [BOOTSTRAP_PORT]
--decode URL --host H --port P`` (the form SGLang 0.5.23's own PD tests start it with,
``test/server_fixtures/disaggregation_fixture.py``): every generation request goes to one prefill and one
decode server at once, with the same ``bootstrap_host``/``bootstrap_port``/``bootstrap_room`` added to its
JSON; the client gets the decode server's answer, streamed through byte for byte (raw UTF-8, nothing
re-encoded).  When the prefill half fails first, the client gets its error; a server that is down is a
503 at once.  Binds 127.0.0.1 unless told otherwise.  Servers are picked round-robin.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import random
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

DEFAULT_BOOTSTRAP_PORT = 8998
CONNECT_TIMEOUT_S = 5.0
log = logging.getLogger("kimitui.sim.router")


@dataclass(frozen=True)
class Prefill:
    url: str
    bootstrap_port: int

    @property
    def bootstrap_host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "router_error", "code": status}}, status_code=status)


class Upstream(Exception):
    """A worker could not be reached or answered an error: the response to give the client."""

    def __init__(self, response: Response) -> None:
        super().__init__("upstream failed")
        self.response = response


class PdRouter:
    """The router's state: its workers, one HTTP client, the round-robin cursors."""

    def __init__(self, prefills: Sequence[Prefill], decodes: Sequence[str]) -> None:
        self.prefills = list(prefills)
        self.decodes = [d.rstrip("/") for d in decodes]
        self._next_prefill = itertools.cycle(range(len(self.prefills)))
        self._next_decode = itertools.cycle(range(len(self.decodes)))
        self.client = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_S))
        self.app = Starlette(routes=[
            Route("/health", self.health, methods=["GET"]),
            Route("/health_generate", self.health_generate, methods=["GET"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/chat/completions", self.generate, methods=["POST"]),
            Route("/v1/completions", self.generate, methods=["POST"]),
            Route("/generate", self.generate, methods=["POST"]),
        ])

    async def health(self, request: Request) -> Response:
        return Response(status_code=200)

    async def health_generate(self, request: Request) -> Response:
        """Healthy when every worker's /health answers 200."""
        urls = [p.url.rstrip("/") for p in self.prefills] + self.decodes
        for url in urls:
            try:
                r = await self.client.get(url + "/health", timeout=httpx.Timeout(10.0, connect=CONNECT_TIMEOUT_S))
            except httpx.HTTPError as exc:
                return error(503, f"worker {url} unreachable: {type(exc).__name__}")
            if r.status_code != 200:
                return error(503, f"worker {url} unhealthy: /health answered {r.status_code}")
        return Response(status_code=200)

    async def models(self, request: Request) -> Response:
        url = self.decodes[0]
        try:
            r = await self.client.get(url + "/v1/models")
        except httpx.HTTPError as exc:
            return error(503, f"decode server {url} unreachable: {type(exc).__name__}")
        return Response(r.content, status_code=r.status_code, media_type=r.headers.get("content-type"))

    def _pick(self) -> tuple[Prefill, str]:
        return self.prefills[next(self._next_prefill)], self.decodes[next(self._next_decode)]

    async def generate(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            return error(400, f"invalid JSON body: {exc}")
        if not isinstance(body, dict):
            return error(400, "request body must be a JSON object")
        prefill, decode = self._pick()
        body.update(bootstrap_host=prefill.bootstrap_host, bootstrap_port=prefill.bootstrap_port,
                    bootstrap_room=random.getrandbits(63))
        path = request.url.path
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("x-request-id", "x-custom-labels", "authorization")}
        prefill_task = asyncio.create_task(self._prefill(prefill.url.rstrip("/") + path, body, headers))
        decode_req = self.client.build_request("POST", decode + path, json=body, headers=headers)
        decode_task = asyncio.create_task(self._decode(decode_req, decode))
        try:
            resp = await _first_failure_or(decode_task, prefill_task)
        except Upstream as exc:
            return exc.response
        if resp.status_code != 200 or not bool(body.get("stream")):
            content = await resp.aread()
            await resp.aclose()
            if resp.status_code == 200:  # the decode half is done; the prefill half must be too
                with contextlib.suppress(Upstream):
                    await prefill_task
            return Response(content, status_code=resp.status_code, media_type=resp.headers.get("content-type"))
        return StreamingResponse(_relay(resp, prefill_task), status_code=200, media_type=resp.headers.get("content-type"))

    async def _prefill(self, url: str, body: dict[str, object], headers: dict[str, str]) -> None:
        try:
            r = await self.client.post(url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise Upstream(error(503, f"prefill server {url} unreachable: {type(exc).__name__}")) from None
        if r.status_code != 200:
            raise Upstream(Response(r.content, status_code=r.status_code, media_type=r.headers.get("content-type")))

    async def _decode(self, req: httpx.Request, url: str) -> httpx.Response:
        try:
            return await self.client.send(req, stream=True)
        except httpx.HTTPError as exc:
            raise Upstream(error(503, f"decode server {url} unreachable: {type(exc).__name__}")) from None


async def _first_failure_or(decode_task: asyncio.Task[httpx.Response], prefill_task: asyncio.Task[None]) -> httpx.Response:
    """The decode server's response once its headers come, unless the prefill half fails first (then the
    decode request is given up: it could never get its KV)."""
    done, _ = await asyncio.wait({decode_task, prefill_task}, return_when=asyncio.FIRST_COMPLETED)
    if prefill_task in done and prefill_task.exception() is not None:
        decode_task.cancel()
        with contextlib.suppress(BaseException):
            resp = await decode_task
            await resp.aclose()
        raise prefill_task.exception()  # type: ignore[misc]  # an Upstream, checked just above
    try:
        return await decode_task
    except Upstream:
        prefill_task.cancel()
        raise


async def _relay(resp: httpx.Response, prefill_task: asyncio.Task[None]) -> AsyncIterator[bytes]:
    """The decode server's bytes as they come (no decoding, no re-encoding)."""
    try:
        async for chunk in resp.aiter_raw():
            yield chunk
    finally:
        await resp.aclose()
        if not prefill_task.done():
            prefill_task.cancel()
        with contextlib.suppress(BaseException):
            await prefill_task


# --------------------------------------------------------------------------- command line


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kimitui.sim.router",
                                description="simulated SGLang PD router (mirrors sglang_router.launch_router)")
    p.add_argument("--pd-disaggregation", action="store_true", help="PD mode (the only mode this router has)")
    p.add_argument("--prefill", nargs="+", action="append", default=[], metavar=("URL", "BOOTSTRAP_PORT"),
                   help="a prefill server and its bootstrap port (default 8998); repeat for more")
    p.add_argument("--decode", action="append", default=[], metavar="URL", help="a decode server; repeat for more")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--policy", default="round_robin", help="accepted; this router always goes round-robin")
    p.add_argument("--prefill-policy", default=None, help="accepted, ignored")
    p.add_argument("--decode-policy", default=None, help="accepted, ignored")
    p.add_argument("--mini-lb", action="store_true", help="accepted, ignored")
    args = p.parse_args(argv)
    if not args.pd_disaggregation:
        p.error("only --pd-disaggregation is simulated")
    if not args.prefill or not args.decode:
        p.error("--pd-disaggregation needs at least one --prefill and one --decode")
    return args


def prefills_from(values: list[list[str]]) -> list[Prefill]:
    out = []
    for item in values:
        if len(item) > 2:
            raise SystemExit(f"--prefill takes URL [BOOTSTRAP_PORT], got {item}")
        port = item[1] if len(item) == 2 and item[1].lower() != "none" else str(DEFAULT_BOOTSTRAP_PORT)
        if not port.isdigit():
            raise SystemExit(f"--prefill {item[0]}: bootstrap port {port!r} is not a number")
        out.append(Prefill(item[0], int(port)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from kimitui.sim.server import bind, uvicorn_log_config  # the sim server's HTTP stack and log format

    args = parse_args(argv)
    router = PdRouter(prefills_from(args.prefill), args.decode)
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        print(f"ERROR: could not bind {args.host}:{args.port}: {exc}", file=sys.stderr, flush=True)
        return 1
    port = sock.getsockname()[1]
    print(f"Starting router on {args.host}:{port} | mode: PD Disaggregated | policy: round_robin | "
          f"prefill: {[(p.url, p.bootstrap_port) for p in router.prefills]} | decode: {router.decodes}", file=sys.stderr, flush=True)
    config = uvicorn.Config(router.app, log_config=uvicorn_log_config(), access_log=False, timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(server.serve(sockets=[sock]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
