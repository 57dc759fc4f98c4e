"""GPU telemetry into the Session: ship the agent over a Host, turn its frames into events.

Nothing is installed on the GPU host.  ``python3 -u -c BOOTSTRAP ARGS`` reads
the agent's source length-prefixed from stdin and execs it, so stdin stays the
agent's control channel: a ``ping`` every second (the agent exits after
``heartbeat_s`` without one), and EOF when we go.  When the stream ends
unexpectedly (link lost, agent died) the gap is published, the stream waits
for the host to come back and starts a fresh agent.  Nothing here raises into
the caller: every failure becomes an :class:`~kimitui.events.ErrorEvent`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import kimitui
from kimitui.events import (
    ErrorEvent,
    Event,
    GpuCaps,
    GpuEvent,
    GpuProcess,
    GpuProcs,
    GpuReading,
    GpuSample,
    GpuStatic,
)
from kimitui.host.base import Host, HostError, Stream
from kimitui.session import Session

log = logging.getLogger(__name__)

AGENT_PATH = Path(__file__).with_name("agent.py")
BOOTSTRAP = (
    "import sys;b=sys.stdin.buffer;n=int(b.readline());s=b.read(n);"
    "sys.argv=['kimitui-agent']+sys.argv[1:];"
    "exec(compile(s,'kimitui-agent','exec'),{'__name__':'__main__'})"
)
"""Reads ``<length>\\n<source>`` from stdin and runs it; the rest of stdin is the control channel."""

_READING_FIELDS = frozenset(GpuReading.model_fields)
_STATIC_FIELDS = frozenset(GpuStatic.model_fields)
_PROCESS_FIELDS = frozenset(GpuProcess.model_fields)
EXIT_INIT_FAILED = 2


def agent_source() -> bytes:
    return AGENT_PATH.read_bytes()


def bootstrap_payload(source: bytes | None = None) -> bytes:
    src = agent_source() if source is None else source
    return f"{len(src)}\n".encode() + src


class GpuStream:
    """Runs the GPU agent on ``host`` for as long as it is started; publishes GPU events."""

    def __init__(
        self,
        host: Host,
        session: Session,
        interval: float = 0.25,
        backend: str = "pynvml",
        python: str = "python3",
        *,
        heartbeat_s: float = 5.0,
        ping_every_s: float = 1.0,
        agent_args: tuple[str, ...] = (),
        reconnect_timeout_s: float = 30.0,
        min_backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
    ) -> None:
        self.host = host
        self.session = session
        self.interval = interval
        self.backend = backend
        self.python = python
        self.heartbeat_s = heartbeat_s
        self.ping_every_s = ping_every_s
        self.agent_args = agent_args
        self.reconnect_timeout_s = reconnect_timeout_s
        self.min_backoff_s = min_backoff_s
        self.max_backoff_s = max_backoff_s
        self.uuids: dict[int, str] = {}
        self.caps: GpuCaps | None = None
        self.last_sample_t: float | None = None
        self.starts = 0
        """How many agents were started (1 + restarts)."""
        self._task: asyncio.Task[None] | None = None
        self._stream: Stream | None = None
        self._stopping = False
        self._bad_frames = 0
        self._gap_since: float | None = None
        """Wall time the current gap in telemetry began (None while streaming)."""

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        if self._task is None or self._task.done():
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"gpu-stream-{self.host.name}")

    async def stop(self) -> None:
        """Close the agent's stdin (it exits), stop the stream, end the task; idempotent."""
        self._stopping = True
        stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.close_stdin()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 3.0)
            except (asyncio.TimeoutError, Exception):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.stop(grace_s=1.0)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    # -- the loop ------------------------------------------------------------------
    def argv(self, backend: str | None = None) -> list[str]:
        backend = backend or self.backend
        python = self.python
        if backend == "fake" and python == "python3":
            # the simulated host is this machine: its fake NVML needs kimitui's own interpreter (pynvml)
            python = sys.executable
        args = [python, "-u", "-c", BOOTSTRAP, "--interval", f"{self.interval:g}", "--backend", backend,
                "--heartbeat", f"{self.heartbeat_s:g}", "--tag", f"kimitui-gpu-{self.host.name}", *self.agent_args]
        if backend == "fake":  # the simulated host is local: let the agent import kimitui.sim.nvml
            args += ["--pythonpath", str(Path(kimitui.__file__).resolve().parents[1])]
        return args

    async def _run(self) -> None:
        backoff = self.min_backoff_s
        backend = self.backend
        while not self._stopping:
            started = time.monotonic()
            outcome = await self._run_once(backend)
            if self._stopping:
                return
            if self._gap_since is None:  # the gap in the data began with the last sample received
                self._gap_since = self.last_sample_t or time.time()
            if outcome == "no_pynvml" and backend == "pynvml":
                backend = "nvidia-smi"
                self._error("pynvml is not importable on the host; falling back to nvidia-smi")
                continue
            if time.monotonic() - started > 10.0:
                backoff = self.min_backoff_s  # it ran fine for a while: restart promptly
            await self._wait_for_host(backoff)
            backoff = min(backoff * 2, self.max_backoff_s)

    async def _wait_for_host(self, delay: float) -> None:
        """Back off while the host is up (the agent itself failed); wait for it while it is not."""
        wait_connected = getattr(self.host, "wait_connected", None)
        if wait_connected is not None and not getattr(self.host, "connected", True):
            while not self._stopping:
                try:
                    await wait_connected(timeout=self.reconnect_timeout_s)
                    return
                except HostError as exc:
                    self._error("GPU host unreachable", str(exc))
                    await asyncio.sleep(min(delay, self.max_backoff_s))
                except Exception as exc:  # noqa: BLE001 - never raise into the caller
                    self._error("waiting for the GPU host failed", repr(exc))
                    await asyncio.sleep(delay)
            return
        await asyncio.sleep(delay)

    async def _run_once(self, backend: str) -> str:
        """One agent's life; returns why it ended: stopped, ended, lost, failed, no_pynvml."""
        try:
            stream = await self.host.stream(self.argv(backend))
        except HostError as exc:
            self._error("could not start the GPU agent", str(exc))
            return "failed"
        except Exception as exc:  # noqa: BLE001
            self._error("could not start the GPU agent", repr(exc))
            return "failed"
        self._stream = stream
        self.starts += 1
        pinger: asyncio.Task[None] | None = None
        state = {"no_pynvml": False, "bye": False}
        try:
            await stream.write(bootstrap_payload())
            pinger = asyncio.get_running_loop().create_task(self._ping(stream))
            async for line in stream:
                self._handle(line, state)
        except HostError as exc:
            if not self._stopping:
                self._error("GPU agent stream interrupted", str(exc))
        except Exception as exc:  # noqa: BLE001
            if not self._stopping:
                self._error("GPU agent stream failed", repr(exc))
        finally:
            if pinger is not None:
                pinger.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pinger
            with contextlib.suppress(Exception):
                await stream.stop(grace_s=1.0)
            self._stream = None
        if self._stopping:
            return "stopped"
        if state["no_pynvml"]:
            return "no_pynvml"
        detail = getattr(stream, "stderr_tail", None)
        tail = detail.text()[-500:] if detail is not None else ""
        self._error("GPU telemetry interrupted", f"agent ended (exit {stream.exit_code}); restarting. {tail}".strip())
        return "ended" if stream.exit_code == 0 and state["bye"] else "lost"

    async def _ping(self, stream: Stream) -> None:
        with contextlib.suppress(HostError, asyncio.CancelledError, ConnectionError, OSError):
            while True:
                await asyncio.sleep(self.ping_every_s)
                await stream.write(b"ping\n")

    # -- frames -> events ------------------------------------------------------------
    def _publish(self, event: Event) -> None:
        self.session.publish(event)

    def _error(self, message: str, detail: str = "") -> None:
        self._publish(ErrorEvent(host=self.host.name, source="gpu", message=message, detail=detail))

    def _handle(self, line: str, state: dict[str, Any]) -> None:
        if not line.strip():
            return
        try:
            frame = json.loads(line)
            kind = frame.get("type") if isinstance(frame, dict) else None
            if kind == "tick":
                self._tick(frame)
            elif kind == "caps":
                self._caps(frame)
                if self._gap_since is not None:
                    gap = time.time() - self._gap_since
                    self._publish(GpuEvent(host=self.host.name, event="gap", gpu_index=None,
                                           detail=f"GPU telemetry resumed after a {gap:.1f} s gap"))
                    self._gap_since = None
            elif kind == "procs":
                self._procs(frame)
            elif kind == "event":
                xid = frame.get("xid")
                self._publish(GpuEvent(host=self.host.name, gpu_index=frame.get("index"), event=str(frame.get("event")),
                                       detail=str(frame.get("detail", "")), xid=xid if isinstance(xid, int) else None))
            elif kind == "error":
                detail = str(frame.get("detail", ""))
                if "No module named 'pynvml'" in detail:
                    state["no_pynvml"] = True
                self._error(str(frame.get("message", "agent error")), detail)
            elif kind == "bye":
                state["bye"] = True
            else:
                raise ValueError(f"unknown frame type {kind!r}")
        except (ValueError, ValidationError, TypeError, AttributeError) as exc:
            self._bad_frames += 1
            if self._bad_frames <= 5 or self._bad_frames % 1000 == 0:
                self._error("GPU agent sent a frame kimitui does not understand",
                            f"#{self._bad_frames}: {exc}; line: {line[:200]!r}")

    def _caps(self, frame: dict[str, Any]) -> None:
        gpus = []
        for g in frame.get("gpus", []):
            static = {k: v for k, v in g.items() if k in _STATIC_FIELDS}
            static["uuid"] = str(static.get("uuid", ""))
            static["name"] = str(static.get("name", ""))
            gpus.append(GpuStatic(**static))
            self.uuids[int(g["index"])] = static["uuid"]
        features = {str(k): str(v) for k, v in (frame.get("features") or {}).items()}
        self.caps = GpuCaps(host=self.host.name, driver=frame.get("driver"), nvml_version=frame.get("nvml_version"),
                            backend=str(frame.get("backend", self.backend)), gpus=gpus, features=features)
        self._publish(self.caps)

    def _tick(self, frame: dict[str, Any]) -> None:
        readings = []
        for g in frame.get("gpus", []):
            fields = {k: v for k, v in g.items() if k in _READING_FIELDS}
            fields.setdefault("uuid", self.uuids.get(int(g["index"]), ""))
            readings.append(GpuReading(**fields))
        self.last_sample_t = time.time()
        self._publish(GpuSample(host=self.host.name, t=self.last_sample_t, seq=int(frame.get("seq", 0)),
                                host_t=frame.get("t"), gpus=readings))

    def _procs(self, frame: dict[str, Any]) -> None:
        procs = [GpuProcess(**{k: v for k, v in p.items() if k in _PROCESS_FIELDS and v is not None})
                 for p in frame.get("procs", [])]
        self._publish(GpuProcs(host=self.host.name, procs=procs))
