"""The simulated SGLang server: starlette + uvicorn (as SGLang itself uses), one process.

``run_server(settings)`` binds the port at once (so ``/health`` can answer 503
while "starting"), acts out the start-up, then serves SGLang's HTTP API from
one scheduler loop until SIGINT/SIGTERM (exit 0) or a fault (exit 1).  While it
runs it writes the simulated GPUs' state for the fake NVML.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from kimitui.sim.faults import FaultPlan
from kimitui.sim.gpus import GpuModel, release_state, state_target, write_loop
from kimitui.sim.http_gen import GenerationRoutes, SimulatedDrop
from kimitui.sim.http_info import InfoRoutes
from kimitui.sim.logfmt import SimLog
from kimitui.sim.multinode import Rendezvous
from kimitui.sim.pd import PdRole
from kimitui.sim.prometheus import SimMetrics
from kimitui.sim.perf_model import PerfModel
from kimitui.sim.scheduler import Scheduler, SimClock
from kimitui.sim.settings import ServerSettings
from kimitui.sim.startup import BootState, StartupFailed, run_startup

_ENGINE_TYPE = {"null": "unified", "prefill": "prefill", "decode": "decode"}
"""0.5.23 ``disaggregation/utils.py`` ``DisaggregationMode.to_engine_type``: the metrics' ``engine_type`` label."""
_HELD_BACK = ("Started server process", "Waiting for application startup.", "Application startup complete.")


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


class SimServer(InfoRoutes, GenerationRoutes):
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
            SimMetrics(settings.served_model_name, self.model.max_total_num_tokens, settings.context_length,
                       settings.tokenizer_metrics_allowed_custom_labels, engine_type=_ENGINE_TYPE[settings.disaggregation_mode],
                       weights_gb=self.model.weights_gb, kv_gb=self.model.kv_gb, graph_gb=self.model.graph_gb,
                       startup_plan=self.model.startup_plan(), max_running_requests=self.model.max_running_requests)
            if settings.enable_metrics
            else None
        )
        if self.metrics is not None and settings.speculative:
            self.metrics.spec_shape = (settings.speculative_num_steps, settings.speculative_num_draft_tokens)
        self.pd = (PdRole(settings, self.clock, self.log, self.model.max_total_num_tokens)
                   if settings.disaggregation_mode != "null" else None)
        if self.metrics is not None and self.pd is not None:
            self.metrics.enable_pd()
        self.rdv = Rendezvous(settings, self.log, lambda: self._fatal(1)) if settings.nnodes > 1 else None
        self.accepting = False
        self.ready = False
        self.exit_code = 0
        self.port = settings.port
        self._stop: asyncio.Event | None = None
        self._sched_task: asyncio.Task[None] | None = None
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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry: counts HTTP requests/responses for /metrics, then the app."""
        if scope["type"] != "http" or self.metrics is None:
            await self.app(scope, receive, send)
            return
        status = {"code": 500}

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        endpoint, method = scope.get("path", ""), scope.get("method", "")
        self.metrics.http_active(endpoint, method, +1)
        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self.metrics.http_active(endpoint, method, -1)
            self.metrics.http(endpoint, method, status["code"])

    # ------------------------------------------------------------------ life cycle
    async def _fatal(self, code: int) -> None:
        self.exit_code = code
        if self._stop is not None:
            self._stop.set()

    def _uv(self, message: str, *args: object) -> None:
        self._uvicorn_log.info(message, *args, extra={"sim_emit": True})

    async def _warmup(self) -> None:
        """SGLang's warm-up: GET /model_info, then an 8-token /generate, over real HTTP."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.s.host, self.s.host)
        url = f"http://{_netloc(host)}:{self.port}"
        async with httpx.AsyncClient(timeout=None, trust_env=False) as client:
            await client.get(f"{url}/model_info")
            body = {"text": "The capital city of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
            await client.post(f"{url}/generate", json=body)

    async def _boot(self) -> None:
        await run_startup(self.s, self.model, self.log, self.clock, self.boot, self.rdv.wait_all if self.rdv else None)
        self.sched = Scheduler(self.s, self.model, self.log, self.clock, on_fatal=self._fatal)
        if self.metrics is not None:
            self.sched.on_queue_wait = self.metrics.queue_wait
        if self.pd is not None:
            if self.pd.mode == "prefill":
                self.sched.pd_prefill_counts = self.pd.prefill_counts
            else:
                self.sched.pd_decode_counts = self.pd.decode_counts
        self._sched_task = asyncio.create_task(self.sched.run(), name="sim-scheduler")
        self._uv("Started server process [%d]", os.getpid())
        self._uv("Waiting for application startup.")
        self._uv("Application startup complete.")
        self._uv("Uvicorn running on http://%s:%d (Press CTRL+C to quit)", _netloc(self.s.host), self.port)
        self.accepting = True
        await self.clock.sleep(self.model.startup_plan()["warmup"])
        await self._warmup()
        self.boot.enter("serving")
        self.sched.episodes.serving_from(self.clock.now())
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
        server.capture_signals = _no_signal_capture  # type: ignore[method-assign]  # we own SIGINT/SIGTERM, not uvicorn
        uv_task = asyncio.create_task(server.serve(sockets=[sock]), name="sim-uvicorn")
        failed = await self._open_side_ports()
        if failed:
            server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(uv_task, timeout=5)
            return 1
        state_file = state_target(self.s, os.getpid())
        gpu_model = GpuModel(self.s, os.getpid(), self.log.rank_title)
        gpu_task = asyncio.create_task(write_loop(gpu_model, self.boot, lambda: self.sched.stats if self.sched else None, state_file))
        side_tasks = [asyncio.create_task(self.rdv.send_stats(lambda: self.sched.stats if self.sched else None,
                                                              lambda: self.boot.phase))] if self.rdv else []
        boot_task = asyncio.create_task(self._boot(), name="sim-boot")
        stop_task = asyncio.create_task(self._stop.wait())
        self._sched_task = None
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
            if self.sched is not None:
                self.sched.drop_all()
                await asyncio.sleep(0)  # let the handlers see it and close their connections
            server.should_exit = True
            if self.exit_code:
                server.force_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(uv_task, timeout=5)
            for task in side_tasks:
                task.cancel()
            await self._close_side_ports()
            gpu_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gpu_task
            release_state(state_file)
        return self.exit_code

    async def _open_side_ports(self) -> bool:
        """The PD bootstrap port (prefill) and the multi-node store (rank 0); True when one cannot be bound."""
        try:
            if self.pd is not None and self.pd.mode == "prefill":
                await self.pd.start_bootstrap(self.s.host)
            if self.rdv is not None:
                await self.rdv.listen()
        except OSError as exc:
            self.log.line(f"Scheduler hit an exception: OSError: [Errno {exc.errno}] {exc.strerror or exc}: "
                          f"could not bind the {'dist-init' if self.rdv and self.pd is None else 'bootstrap or dist-init'} port")
            return True
        return False

    async def _close_side_ports(self) -> None:
        if self.pd is not None:
            await self.pd.close()
        if self.rdv is not None:
            if self.exit_code:  # a failing rank 0 just goes: the others see the connection drop
                self.rdv.closing = True
                for _, writer in self.rdv.peers.values():
                    writer.close()
            else:
                await self.rdv.close()


@contextlib.contextmanager
def _no_signal_capture() -> Iterator[None]:
    """Stands in for uvicorn's ``capture_signals``: the server installs its own handlers."""
    yield


def _netloc(host: str) -> str:
    return f"[{host}]" if ":" in host else host


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
            stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # TextIO does not declare it; a stream without it is suppressed
    try:
        sock = bind(settings.host, settings.port)
    except OSError as exc:
        ts = time.strftime("%Y-%m-%d %H:%M:%S")
        print(f"[{ts}] ERROR:    [Errno {exc.errno}] error while attempting to bind on address ('{settings.host}', {settings.port}): {exc.strerror.lower() if exc.strerror else exc}", file=sys.stderr, flush=True)
        return 1
    sim = SimServer(settings)
    loop_factory = None
    try:
        import uvloop  # optional: not installed on Windows

        loop_factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        pass
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(sim.serve(sock))
