"""The simulated SGLang server: starlette + uvicorn (as SGLang itself uses), one process.

``run_server(settings)`` binds the port at once (so ``/health`` can answer 503
while "starting"), acts out the start-up, then serves SGLang's HTTP API from
one scheduler loop until SIGINT/SIGTERM (exit 0) or a fault (exit 1).  While it
runs it writes the simulated GPUs' state for the fake NVML.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from kimitui.sim import api
from kimitui.sim.faults import FaultPlan, RequestFault, internal_error_body
from kimitui.sim.gpus import GpuModel, write_idle, write_loop
from kimitui.sim.logfmt import SimLog
from kimitui.sim.metrics import CONTENT_TYPE, SimMetrics
from kimitui.sim.model import PerfModel
from kimitui.sim.scheduler import Req, Scheduler, SimClock
from kimitui.sim.settings import ServerSettings
from kimitui.sim.startup import BootState, StartupFailed, run_startup
from kimitui.sim.textgen import TokenStream, natural_length, stable_hash

SGLANG_VERSION = "0.5.10"
HEALTH_TIMEOUT_S = 20.0
_HELD_BACK = ("Started server process", "Waiting for application startup.", "Application startup complete.")


class SimulatedDrop(Exception):
    """Raised inside a response body to cut the connection (fault ``drop``)."""


class _UvicornFilter(logging.Filter):
    """Hold back uvicorn's start message (we print it where SGLang does) and our drop tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "sim_emit", False):
            return True
        if record.exc_info and isinstance(record.exc_info[1], SimulatedDrop):
            return False
        return not str(record.msg).startswith(_HELD_BACK)


def uvicorn_log_config() -> dict[str, Any]:
    """SGLang's uvicorn formats (set_uvicorn_logging_configs): default to stderr, access to stdout."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"sim": {"()": _UvicornFilter}},
        "formatters": {
            "default": {
                "()": "uvicorn.logging.DefaultFormatter",
                "fmt": "[%(asctime)s] %(levelprefix)s %(message)s",
                "datefmt": "%Y-%m-%d %H:%M:%S",
                "use_colors": False,
            },
            "access": {
                "()": "uvicorn.logging.AccessFormatter",
                "fmt": '[%(asctime)s] %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s',
                "datefmt": "%Y-%m-%d %H:%M:%S",
                "use_colors": False,
            },
        },
        "handlers": {
            "default": {"formatter": "default", "class": "logging.StreamHandler", "stream": "ext://sys.stderr", "filters": ["sim"]},
            "access": {"formatter": "access", "class": "logging.StreamHandler", "stream": "ext://sys.stdout"},
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        },
    }


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


_DONE = b"data: [DONE]\n\n"


class SimServer:
    """One simulated SGLang server: its state, its HTTP app and its life cycle."""

    def __init__(self, settings: ServerSettings) -> None:
        self.s = settings
        self.model = PerfModel(settings)
        self.clock = SimClock(settings.time_scale)
        self.log = SimLog(settings)
        self.boot = BootState()
        self.faults = FaultPlan(settings)
        self.sched: Scheduler | None = None
        self.metrics = (
            SimMetrics(settings.served_model_name, self.model.max_total_num_tokens, settings.context_length)
            if settings.enable_metrics
            else None
        )
        self.accepting = False
        self.ready = False
        self.exit_code = 0
        self.port = settings.port
        self._stop: asyncio.Event | None = None
        self._uvicorn_log = logging.getLogger("uvicorn.error")
        self.app = self._build_app()

    # ------------------------------------------------------------------ app
    def _build_app(self) -> Starlette:
        routes = [
            Route("/health", self.health, methods=["GET"]),
            Route("/health_generate", self.health, methods=["GET"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self.model_card, methods=["GET"]),
            Route("/server_info", self.server_info, methods=["GET"]),
            Route("/get_server_info", self.server_info_deprecated, methods=["GET"]),
            Route("/model_info", self.model_info, methods=["GET"]),
            Route("/get_model_info", self.model_info_deprecated, methods=["GET"]),
            Route("/v1/loads", self.loads, methods=["GET"]),
            Route("/metrics", self.metrics_endpoint, methods=["GET"]),
            Route("/flush_cache", self.flush_cache, methods=["GET", "POST"]),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/generate", self.generate, methods=["POST"]),
        ]
        app = Starlette(routes=routes)
        return app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        """ASGI entry: counts HTTP requests/responses for /metrics, then the app."""
        if scope["type"] != "http" or self.metrics is None:
            await self.app(scope, receive, send)
            return
        status = {"code": 500}

        async def send_wrapper(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self.metrics.http(scope.get("path", ""), scope.get("method", ""), status["code"])

    # ------------------------------------------------------------------ info endpoints
    async def health(self, request: Request) -> Response:
        if not self.ready or self.sched is None:
            return Response(status_code=503)
        if self.sched.stats.hung:
            tic = time.strftime("%H:%M:%S")
            await self.clock.sleep(HEALTH_TIMEOUT_S)
            self.log.line(
                f"Health check failed. Server couldn't get a response from detokenizer for last "
                f"{int(HEALTH_TIMEOUT_S)} seconds. tic start time: {tic}. last_heartbeat time: {tic}"
            )
            return Response(status_code=503)
        return Response(status_code=200)

    def _card(self) -> dict[str, Any]:
        name = self.s.served_model_name
        return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang", "root": name, "parent": None, "max_model_len": self.s.context_length}

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [self._card()]})

    async def model_card(self, request: Request) -> Response:
        if request.path_params["model_id"] != self.s.served_model_name:
            msg = f"The model `{request.path_params['model_id']}` does not exist."
            return JSONResponse({"error": {"message": msg, "type": "invalid_request_error", "param": "model", "code": "model_not_found"}}, status_code=404)
        return JSONResponse(self._card())

    def server_info_dict(self) -> dict[str, Any]:
        args = self.s.server_args() | {"port": self.port}
        st = self.sched.stats if self.sched else None
        internal = dict(args)
        internal.update(
            last_gen_throughput=round(st.last_gen_throughput, 2) if st else 0.0,
            memory_usage={
                "weight": round(self.model.weights_gb, 2),
                "kvcache": round(self.model.kv_gb, 2),
                "token_capacity": self.model.max_total_num_tokens,
                "graph": round(self.model.graph_gb, 2),
            },
            effective_max_running_requests_per_dp=self.model.max_running_requests,
        )
        if self.s.speculative:
            internal["avg_spec_accept_length"] = round(st.spec_accept_length, 3) if st else 0.0
        return args | {
            "status": "ready" if self.ready else "starting",
            "max_total_num_tokens": self.model.max_total_num_tokens,
            "max_req_input_len": self.s.context_length - 5,
            "internal_states": [internal],
            "version": SGLANG_VERSION,
            "kv_events": None,
            "sim": True,
            "sim_profile": self.s.name,
            "sim_time_scale": self.s.time_scale,
            "sim_seed": self.s.seed,
            "sim_fault": self.s.fault,
            "sim_fault_rate": self.s.fault_rate,
        }

    async def server_info(self, request: Request) -> Response:
        return JSONResponse(self.server_info_dict())

    async def server_info_deprecated(self, request: Request) -> Response:
        self.log.line("Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use '/server_info' instead.")
        return await self.server_info(request)

    async def model_info(self, request: Request) -> Response:
        return JSONResponse(
            {
                "model_path": self.s.model_path,
                "tokenizer_path": self.s.model_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": "kimi_k25",
                "architectures": ["KimiK25ForConditionalGeneration"],
            }
        )

    async def model_info_deprecated(self, request: Request) -> Response:
        self.log.line("Endpoint '/get_model_info' is deprecated and will be removed in a future version. Please use '/model_info' instead.")
        return await self.model_info(request)

    async def loads(self, request: Request) -> Response:
        st = self.sched.stats if self.sched else None
        running = st.running if st else 0
        waiting = st.queue if st else 0
        used = st.kv_tokens if st else 0
        total = self.model.max_total_num_tokens
        thr = round(st.last_gen_throughput, 2) if st else 0.0
        load = {
            "dp_rank": 0,
            "num_running_reqs": running,
            "num_waiting_reqs": waiting,
            "num_used_tokens": used,
            "num_total_tokens": total,
            "max_total_num_tokens": total,
            "token_usage": round(used / total, 4),
            "gen_throughput": thr,
            "cache_hit_rate": 0.0,
            "utilization": round(min(1.0, running / max(1, self.model.max_running_requests)), 4),
            "max_running_requests": self.model.max_running_requests,
            "num_total_reqs": running + waiting,
        }
        return JSONResponse(
            {
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z",
                "version": SGLANG_VERSION,
                "dp_rank_count": 1,
                "loads": [load],
                "aggregate": {
                    "total_running_reqs": running,
                    "total_waiting_reqs": waiting,
                    "total_reqs": running + waiting,
                    "total_used_tokens": used,
                    "total_tokens": total,
                    "avg_token_usage": load["token_usage"],
                    "avg_throughput": thr,
                    "avg_utilization": load["utilization"],
                },
            }
        )

    async def metrics_endpoint(self, request: Request) -> Response:
        if self.metrics is None or self.sched is None:
            return PlainTextResponse("Not Found", status_code=404)
        return Response(self.metrics.render(self.sched.stats), media_type=CONTENT_TYPE)

    async def flush_cache(self, request: Request) -> Response:
        text = (
            "Cache flushed.\nPlease check backend logs for more details. "
            "(When there are running or waiting requests, the operation will not be performed.)\n"
        )
        sched = self.sched
        if sched is None or not sched.idle:
            queue, running = (len(sched.waiting), len(sched.running)) if sched else (0, 0)
            self.log.line(f"Cache not flushed because there are pending requests. #queue-req: {queue}, #running-req: {running}", rank=0)
            return PlainTextResponse(text, status_code=400)
        self.log.line("Cache flushed successfully!", rank=0)
        return PlainTextResponse(text)

    # ------------------------------------------------------------------ generation
    async def chat(self, request: Request) -> Response:
        return await self._openai(request, "chat")

    async def completions(self, request: Request) -> Response:
        return await self._openai(request, "completion")

    async def _read(self, request: Request) -> Any:
        try:
            return await request.json()
        except ValueError as exc:
            raise api.BadRequest(f"invalid JSON body: {exc}") from exc

    def _not_accepting(self) -> Response | None:
        if self.accepting and self.sched is not None:
            return None
        return JSONResponse(api.error_body("The server is not ready yet (starting up).", 503, "ServiceUnavailableError"), status_code=503)

    def _make_req(self, p: api.GenParams) -> tuple[Req | None, Response | None]:
        ctx = self.s.context_length
        max_new = p.max_new_tokens if p.max_new_tokens is not None else max(0, ctx - p.prompt_tokens)
        if p.prompt_tokens + max_new > ctx:
            msg = (
                f"Requested token count exceeds the model's maximum context length of {ctx} tokens. "
                f"You requested a total of {p.prompt_tokens + max_new} tokens: {p.prompt_tokens} tokens from the input messages "
                f"and {max_new} tokens for the completion. Please reduce the number of tokens in the input messages "
                "or the completion to fit within the limit."
            )
            return None, JSONResponse(api.error_body(msg), status_code=400)
        target = max_new if p.ignore_eos else min(max_new, natural_length(p.prompt_text, self.s.seed))
        fault = self.faults.for_request(target) if self.ready else None  # never the warm-up
        if fault is None:
            fault = RequestFault()
        if fault.kind == "http_500":
            return None, JSONResponse(internal_error_body(), status_code=500)
        req = Req(
            rid=p.rid,
            prompt_text=p.prompt_text,
            prompt_tokens=p.prompt_tokens,
            max_new_tokens=max_new,
            target=target,
            tokens=TokenStream(p.prompt_text, self.s.seed),
            stop=p.stop,
            drop_at=fault.at_token if fault.kind == "drop" else None,
            stall_at=fault.at_token if fault.kind == "stall" else None,
            stall_s=fault.stall_s,
        )
        return req, None

    async def _openai(self, request: Request, kind: str) -> Response:
        refused = self._not_accepting()
        if refused:
            return refused
        try:
            p = api.parse_openai(await self._read(request), kind)
        except api.BadRequest as exc:
            return JSONResponse(api.error_body(str(exc)), status_code=400)
        req, err = self._make_req(p)
        if err is not None:
            return err
        assert req is not None and self.sched is not None
        self.sched.submit(req)
        if p.stream:
            return StreamingResponse(self._openai_stream(p, req), media_type="text/event-stream")
        if req.drop_at is not None:
            return StreamingResponse(self._dropped_body(req), media_type="application/json")
        text, _gaps = await self._collect(req)
        finish, matched = self._finish(req)
        build = api.chat_response if kind == "chat" else api.completion_response
        return JSONResponse(build(p, self.s.served_model_name, text, finish, matched, req.generated))

    def _finish(self, req: Req) -> tuple[str, Any]:
        if req.finish_reason == "stop":
            return "stop", req.matched_stop if req.matched_stop is not None else api.EOS_TOKEN_ID
        return req.finish_reason or "length", None

    async def _collect(self, req: Req) -> tuple[str, list[tuple[float, int]]]:
        parts: list[str] = []
        gaps: list[tuple[float, int]] = []
        last = None
        try:
            while True:
                pieces, n, done = await req.next_chunk()
                now = time.monotonic()
                if pieces:
                    parts.extend(pieces)
                    if last is not None:
                        gaps.append((now - last, n))
                    last = now
                if done or req.dropped:
                    break
        finally:
            if not req.finished:
                req.abort()
            self._record(req, gaps)
        return "".join(parts), gaps

    async def _dropped_body(self, req: Req) -> AsyncIterator[bytes]:
        await self._collect(req)
        raise SimulatedDrop(req.rid)
        yield b""  # pragma: no cover - makes this an async generator

    def _record(self, req: Req, gaps: list[tuple[float, int]]) -> None:
        if self.metrics is None:
            return
        now = time.monotonic()
        ttft = req.t_first - req.t_arrival if req.t_first is not None else None
        self.metrics.request_done(req.prompt_tokens, req.generated, ttft, now - req.t_arrival, gaps, req.aborted or req.dropped)

    async def _openai_stream(self, p: api.GenParams, req: Req) -> AsyncIterator[bytes]:
        model = self.s.served_model_name
        created = int(time.time())
        chat = p.kind == "chat"
        gaps: list[tuple[float, int]] = []
        last = None
        first = True
        try:
            while True:
                pieces, n, done = await req.next_chunk()
                now = time.monotonic()
                if pieces:
                    if last is not None:
                        gaps.append((now - last, n))
                    last = now
                    text = "".join(pieces)
                    if chat:
                        if first:
                            yield _sse(api.chat_chunk(p, model, created, {"role": "assistant", "content": "", "reasoning_content": None}))
                            first = False
                        chunk = api.chat_chunk(p, model, created, {"reasoning_content": None, "content": text})
                    else:
                        chunk = api.completion_chunk(p, model, created, text)
                    if p.continuous_usage:
                        chunk["usage"] = api.usage(p.prompt_tokens, req.generated)
                    yield _sse(chunk)
                if req.dropped:
                    raise SimulatedDrop(req.rid)
                if done:
                    break
            finish, matched = self._finish(req)
            if chat:
                yield _sse(api.chat_chunk(p, model, created, {"reasoning_content": None, "content": None}, finish, matched))
            else:
                yield _sse(api.completion_chunk(p, model, created, "", finish, matched))
            if p.include_usage:
                yield _sse(api.usage_chunk(p, model, created, req.generated, "chat.completion.chunk" if chat else "text_completion"))
            yield _DONE
        finally:
            if not req.finished:
                req.abort()
            self._record(req, gaps)

    async def generate(self, request: Request) -> Response:
        refused = self._not_accepting()
        if refused:
            return refused
        try:
            p = api.parse_generate(await self._read(request))
        except api.BadRequest as exc:
            return JSONResponse(api.error_body(str(exc)), status_code=400)
        req, err = self._make_req(p)
        if err is not None:
            return err
        assert req is not None and self.sched is not None
        self.sched.submit(req)
        if p.stream:
            return StreamingResponse(self._generate_stream(p, req), media_type="text/event-stream")
        if req.drop_at is not None:
            return StreamingResponse(self._dropped_body(req), media_type="application/json")
        text, _ = await self._collect(req)
        return JSONResponse(api.generate_body(p, text, self._ids(req, req.generated), self._native_finish(req), time.monotonic() - req.t_arrival))

    def _ids(self, req: Req, n: int) -> list[int]:
        base = stable_hash("ids", req.prompt_text) % 150000
        return [(base + i * 7919) % 160000 for i in range(n)]

    def _native_finish(self, req: Req) -> dict[str, Any] | None:
        if not req.finished:
            return None
        if req.finish_reason == "length":
            return {"type": "length", "length": req.generated}
        if req.finish_reason == "abort":
            return {"type": "abort", "message": "connection dropped"}
        return {"type": "stop", "matched": req.matched_stop if req.matched_stop is not None else api.EOS_TOKEN_ID}

    async def _generate_stream(self, p: api.GenParams, req: Req) -> AsyncIterator[bytes]:
        parts: list[str] = []
        gaps: list[tuple[float, int]] = []
        last = None
        try:
            while True:
                pieces, n, done = await req.next_chunk()
                now = time.monotonic()
                if pieces:
                    if last is not None:
                        gaps.append((now - last, n))
                    last = now
                    parts.extend(pieces)
                    finish = self._native_finish(req) if done else None
                    yield _sse(api.generate_body(p, "".join(parts), self._ids(req, req.generated), finish, now - req.t_arrival))
                if req.dropped:
                    raise SimulatedDrop(req.rid)
                if done:
                    break
            yield _DONE
        finally:
            if not req.finished:
                req.abort()
            self._record(req, gaps)

    # ------------------------------------------------------------------ life cycle
    async def _fatal(self, code: int) -> None:
        self.exit_code = code
        if self._stop is not None:
            self._stop.set()

    def _uv(self, message: str, *args: Any) -> None:
        self._uvicorn_log.info(message, *args, extra={"sim_emit": True})

    async def _warmup(self) -> None:
        """SGLang's warm-up: GET /model_info, then an 8-token /generate, over real HTTP."""
        import httpx

        host = "127.0.0.1" if self.s.host in ("0.0.0.0", "::", "") else self.s.host
        url = f"http://{host}:{self.port}"
        async with httpx.AsyncClient(timeout=None, trust_env=False) as client:
            await client.get(f"{url}/model_info")
            body = {"text": "The capital city of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
            await client.post(f"{url}/generate", json=body)

    async def _boot(self) -> None:
        await run_startup(self.s, self.model, self.log, self.clock, self.boot)
        self.sched = Scheduler(self.s, self.model, self.log, self.clock, on_fatal=self._fatal)
        self._sched_task = asyncio.create_task(self.sched.run(), name="sim-scheduler")
        self._uv("Started server process [%d]", os.getpid())
        self._uv("Waiting for application startup.")
        self._uv("Application startup complete.")
        self._uv("Uvicorn running on http://%s:%d (Press CTRL+C to quit)", self.s.host, self.port)
        self.accepting = True
        await self.clock.sleep(self.model.startup_plan()["warmup"])
        await self._warmup()
        self.boot.enter("serving")
        self.ready = True
        self.log.line("The server is fired up and ready to roll!")
        if self.s.fault == "hang":
            self.sched.hang_at = self.clock.now() + (self.s.fault_after_s or 0.0)

    async def serve(self, sock: socket.socket) -> int:
        """Run until stopped; returns the process exit code."""
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.port = sock.getsockname()[1]
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stop.set)
        config = uvicorn.Config(
            self,
            lifespan="on",
            log_config=uvicorn_log_config(),
            timeout_graceful_shutdown=1,
            timeout_keep_alive=30,
            backlog=4096,
        )
        server = uvicorn.Server(config)
        server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]  # we own SIGINT/SIGTERM
        uv_task = asyncio.create_task(server.serve(sockets=[sock]), name="sim-uvicorn")
        gpu_model = GpuModel(self.s, os.getpid(), self.log.rank_title)
        gpu_task = asyncio.create_task(write_loop(gpu_model, self.boot, lambda: self.sched.stats if self.sched else None))
        boot_task = asyncio.create_task(self._boot(), name="sim-boot")
        stop_task = asyncio.create_task(self._stop.wait())
        self._sched_task: asyncio.Task | None = None
        try:
            done, _ = await asyncio.wait({boot_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
            if boot_task in done:
                exc = boot_task.exception()
                if isinstance(exc, StartupFailed):
                    self.exit_code = 1
                elif exc is not None:
                    raise exc
                else:
                    await stop_task
            else:
                boot_task.cancel()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            self.boot.enter("stopping")
            self.ready = self.accepting = False
            if self._sched_task is not None:
                self._sched_task.cancel()
            server.should_exit = True
            if self.exit_code:
                server.force_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(uv_task, timeout=5)
            gpu_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gpu_task
            write_idle()
        return self.exit_code


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(4096)
    sock.setblocking(False)
    return sock


def run_server(settings: ServerSettings) -> int:
    """Foreground entry point for ``kimitui sim serve``: returns the exit code."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    try:
        sock = bind(settings.host, settings.port)
    except OSError as exc:
        ts = time.strftime("%Y-%m-%d %H:%M:%S")
        print(f"[{ts}] ERROR:    [Errno {exc.errno}] error while attempting to bind on address ('{settings.host}', {settings.port}): {exc.strerror.lower() if exc.strerror else exc}", file=sys.stderr, flush=True)
        return 1
    sim = SimServer(settings)
    loop_factory = None
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        pass
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(sim.serve(sock))
