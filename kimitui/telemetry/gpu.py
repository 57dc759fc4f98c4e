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
import math
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

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
from kimitui.supervised import RestartingTask

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

MAX_FRAME_CHARS = 1 << 18
"""A longer line is a bad frame, not parsed (real frames: ~3 KB caps, ~2 KB ticks for 8 GPUs)."""

BAD_FRAME_REPORT_S = 60.0
"""After the first bad frame is reported, the running count is reported at most this often."""


class BadFrame(ValueError):
    """A frame kimitui cannot turn into events; counted and skipped."""


def _reject_constant(name: str) -> NoReturn:
    raise BadFrame(f"{name} is not a number")  # NaN / Infinity: not JSON, and not a reading


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadFrame(f"{text[:40]} is not a finite number")
    return value


def _decode_frame(line: str) -> dict[str, Any]:
    """One agent line -> a dict frame; raises only :class:`BadFrame` (any depth, size or shape)."""
    if len(line) > MAX_FRAME_CHARS:
        raise BadFrame(f"frame of {len(line)} characters (limit {MAX_FRAME_CHARS})")
    try:
        frame = json.loads(line, parse_constant=_reject_constant, parse_float=_finite_float)
    except BadFrame:
        raise
    except RecursionError:
        raise BadFrame("nested too deeply") from None
    except (ValueError, TypeError) as exc:  # JSONDecodeError; an int over 4300 digits is a ValueError too
        raise BadFrame(f"not JSON: {str(exc)[:120]}") from None
    if not isinstance(frame, dict):
        raise BadFrame(f"not an object but {type(frame).__name__}")
    if "\\u" in line:  # a lone surrogate ("\\ud800") decodes, but no recording could write it
        try:
            json.dumps(frame, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise BadFrame("a string with a lone surrogate (not text)") from None
    return frame


def _objects(frame: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """``frame[key]`` as a list of objects (missing = empty); anything else is a bad frame."""
    items = frame.get(key, [])
    if items is None:
        return []
    if not isinstance(items, list) or not all(isinstance(g, dict) for g in items):
        raise BadFrame(f"{key!r} is not a list of objects")
    return items


def _index(g: dict[str, Any]) -> int:
    index = g.get("index")
    if type(index) is not int or not 0 <= index < 1 << 16:
        raise BadFrame(f"GPU index {str(index)[:40]!r} is not a GPU index" if "index" in g else "a GPU without 'index'")
    return index


def agent_source() -> bytes:
    return AGENT_PATH.read_bytes()


def bootstrap_payload(source: bytes | None = None) -> bytes:
    src = agent_source() if source is None else source
    return f"{len(src)}\n".encode() + src


class GpuStream(RestartingTask):
    """Runs the GPU agent on ``host`` for as long as it is started; publishes GPU events."""

    label = "GPU"

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
        super().__init__(host, reconnect_timeout_s=reconnect_timeout_s, min_backoff_s=min_backoff_s,
                         max_backoff_s=max_backoff_s)
        self.session = session
        self.interval = interval
        self.backend = backend
        self._backend = backend
        """The backend the next agent starts with (nvidia-smi once pynvml turned out missing)."""
        self.python = python
        self.heartbeat_s = heartbeat_s
        self.ping_every_s = ping_every_s
        self.agent_args = agent_args
        self.uuids: dict[int, str] = {}
        self.caps: GpuCaps | None = None
        self.last_sample_t: float | None = None
        self.starts = 0
        """How many agents were started (1 + restarts)."""
        self._stream: Stream | None = None
        self.bad_frames = 0
        """Frames skipped because kimitui could not turn them into events (all agents of this stream)."""
        self._bad_reported = 0
        self._bad_reported_at = 0.0
        self._bad_last = ""
        self._gap_since: float | None = None
        """Wall time the current gap in telemetry began (None while streaming)."""

    # -- lifecycle -----------------------------------------------------------------
    def _task_name(self) -> str:
        return f"gpu-stream-{self.host.name}"

    async def start(self) -> None:
        if not self.running:
            self._backend = self.backend  # each start tries the configured backend first
        await super().start()

    async def stop(self) -> None:
        """Close the agent's stdin (it exits), stop the stream, end the task; idempotent."""
        self._stopping = True
        stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.close_stdin()
        await self._end_task(grace_s=3.0)
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.stop(grace_s=1.0)

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

    async def _life(self) -> bool:
        outcome = await self._run_once(self._backend)
        if self._stopping:
            return False
        if self._gap_since is None:  # the gap in the data began with the last sample received
            self._gap_since = self.last_sample_t or time.time()
        if outcome == "no_pynvml" and self._backend == "pynvml":
            self._backend = "nvidia-smi"
            self._error("pynvml is not importable on the host; falling back to nvidia-smi")
            return True
        return False

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
        self._report_bad_frames()
        if self._stopping:
            return "stopped"
        if state["no_pynvml"]:
            return "no_pynvml"
        tail = stream.stderr_tail.text()[-500:] if stream.stderr_tail is not None else ""
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

    def _handle(self, line: str, state: dict[str, bool]) -> None:
        """One agent line -> events.  Total: a frame that cannot be understood (bad JSON, nested too
        deeply, huge or non-finite numbers, a tick without ``index``...) is counted, reported once
        (then its count, at most every :data:`BAD_FRAME_REPORT_S`) and skipped; the agent is not
        restarted, so the good frames after it keep coming."""
        if not line.strip():
            return
        try:
            events = self._events(_decode_frame(line), state)
        except Exception as exc:  # noqa: BLE001 - BadFrame, pydantic's ValidationError, anything else
            self._bad_frame(exc, line)
            return
        for event in events:
            self._publish(event)

    def _bad_frame(self, exc: BaseException, line: str) -> None:
        self.bad_frames += 1
        self._bad_last = f"{type(exc).__name__}: {str(exc)[:200]}; line: {line[:200]!r}"
        if self.bad_frames == 1:
            self._bad_reported, self._bad_reported_at = 1, time.monotonic()
            self._error("GPU agent sent a frame kimitui does not understand; such frames are skipped",
                        f"#1: {self._bad_last}")
        elif time.monotonic() - self._bad_reported_at >= BAD_FRAME_REPORT_S:
            self._report_bad_frames()

    def _report_bad_frames(self) -> None:
        """The running count, when frames were skipped since it was last reported."""
        if self.bad_frames <= self._bad_reported:
            return
        new = self.bad_frames - self._bad_reported
        self._bad_reported, self._bad_reported_at = self.bad_frames, time.monotonic()
        self._error(f"GPU agent: {self.bad_frames} frames skipped in all ({new} since the last report)",
                    f"last: {self._bad_last}")

    def _events(self, frame: dict[str, Any], state: dict[str, bool]) -> list[Event]:
        """The events of one frame, built in full before anything is published or remembered."""
        kind = frame.get("type")
        if kind == "tick":
            return [self._tick(frame)]
        if kind == "caps":
            events: list[Event] = [self._caps(frame)]
            if self._gap_since is not None:
                gap = time.time() - self._gap_since
                events.append(GpuEvent(host=self.host.name, event="gap", gpu_index=None,
                                       detail=f"GPU telemetry resumed after a {gap:.1f} s gap"))
                self._gap_since = None
            return events
        if kind == "procs":
            return [GpuProcs(host=self.host.name, procs=[
                GpuProcess(**{k: v for k, v in p.items() if k in _PROCESS_FIELDS and v is not None})
                for p in _objects(frame, "procs")])]
        if kind == "event":
            xid, index = frame.get("xid"), frame.get("index")
            return [GpuEvent(host=self.host.name, gpu_index=index if type(index) is int else None,
                             event=str(frame.get("event"))[:200], detail=str(frame.get("detail", ""))[:2000],
                             xid=xid if type(xid) is int and abs(xid) < 1 << 31 else None)]
        if kind == "error":
            detail = str(frame.get("detail", ""))[:4000]
            if "No module named 'pynvml'" in detail:
                state["no_pynvml"] = True
            return [ErrorEvent(host=self.host.name, source="gpu", message=str(frame.get("message", "agent error"))[:500],
                               detail=detail)]
        if kind == "bye":
            state["bye"] = True
            return []
        raise BadFrame(f"unknown frame type {str(kind)[:40]!r}")

    def _caps(self, frame: dict[str, Any]) -> GpuCaps:
        gpus, uuids = [], {}
        for g in _objects(frame, "gpus"):
            static = {k: v for k, v in g.items() if k in _STATIC_FIELDS}
            static["index"] = _index(g)
            static["uuid"] = str(static.get("uuid", ""))
            static["name"] = str(static.get("name", ""))
            gpus.append(GpuStatic(**static))
            uuids[static["index"]] = static["uuid"]
        features = frame.get("features") or {}
        if not isinstance(features, dict):
            raise BadFrame("'features' is not an object")
        cuda, given = frame.get("cuda_version"), frame.get("interval")
        interval = float(given) if isinstance(given, (int, float)) and 0 < given < 3600 else None  # else unknown
        caps = GpuCaps(host=self.host.name, driver=frame.get("driver"), nvml_version=frame.get("nvml_version"),
                       backend=str(frame.get("backend", self.backend)), gpus=gpus,
                       features={str(k): str(v) for k, v in features.items()},
                       cuda_version=str(cuda)[:20] if cuda is not None else None,
                       interval_s=interval)
        self.uuids, self.caps = uuids, caps
        return caps

    def _tick(self, frame: dict[str, Any]) -> GpuSample:
        readings = []
        for g in _objects(frame, "gpus"):
            fields = {k: v for k, v in g.items() if k in _READING_FIELDS}
            fields["index"] = _index(g)
            fields.setdefault("uuid", self.uuids.get(fields["index"], ""))
            readings.append(GpuReading(**fields))
        seq, host_t = frame.get("seq", 0), frame.get("t")
        if type(seq) is not int or not 0 <= seq < 1 << 63:
            raise BadFrame(f"seq {str(seq)[:40]!r} is not a count")
        if host_t is not None and type(host_t) not in (int, float):
            raise BadFrame(f"t {str(host_t)[:40]!r} is not a time")
        sample = GpuSample(host=self.host.name, t=time.time(), seq=seq, host_t=host_t, gpus=readings)
        self.last_sample_t = sample.t
        return sample
