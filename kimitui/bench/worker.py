"""The load process: ``python -m kimitui.bench.worker``.

Runs a sweep on its own uvloop event loop so nothing the parent does (TUI
rendering, recording) can delay a chunk's timestamp.

Protocol (all JSON lines):

* stdin, first line: ``{"spec": {...SweepSpec...}, "sweep_id": str, "host": str, "profile": str|null}``.
* stdin, later lines: ``abort`` aborts the sweep.  End of stdin (the parent
  went away) aborts it too.
* stdout: one event per line (:func:`kimitui.events.dump_event`), ending with
  a ``sweep_result``.  Writes go through a non-blocking pipe transport, so a
  slow reader never stalls the load loop.
* stderr: diagnostics only.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import stat
import sys
from typing import Any

from kimitui.events import ErrorEvent, Event, SweepResult, SweepSpec, dump_event


def _parse_config(line: str) -> dict[str, Any]:
    cfg = json.loads(line)
    if not isinstance(cfg, dict) or "spec" not in cfg:
        raise ValueError("first stdin line must be a JSON object with a 'spec'")
    cfg["spec"] = SweepSpec.model_validate(cfg["spec"])
    return cfg


async def _amain(cfg: dict[str, Any]) -> int:
    from kimitui.bench.sweep import SweepEngine

    loop = asyncio.get_running_loop()
    out = await _EventOut.open(loop)
    emit = out.emit

    engine = SweepEngine(cfg["spec"], emit, sweep_id=cfg.get("sweep_id"), host=cfg.get("host") or "sim",
                         profile=cfg.get("profile"), progress_hz=float(cfg.get("progress_hz") or 4.0))

    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def control() -> None:
        while True:
            line = await reader.readline()
            if not line:
                engine.abort("control pipe closed (parent gone)")
                return
            if line.strip() == b"abort":
                engine.abort()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, engine.abort, f"signal {sig.name}")
    ctl = loop.create_task(control())
    try:
        await engine.run()
    finally:
        ctl.cancel()
        await out.close()
    return 0


class _EventOut:
    """Event lines to stdout without ever blocking the load loop.

    A pipe (the normal case: :class:`~kimitui.bench.runner.SweepRunner`) gets a
    non-blocking pipe transport that buffers if the reader is slow; a regular
    file (``> events.jsonl``) or a terminal gets a buffered file flushed a few times a second.
    """

    def __init__(self, transport: asyncio.WriteTransport | None, file: Any = None) -> None:
        self.transport = transport
        self.file = file
        self._flusher: asyncio.TimerHandle | None = None

    @classmethod
    async def open(cls, loop: asyncio.AbstractEventLoop) -> "_EventOut":
        fd = os.dup(sys.stdout.fileno())
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            transport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(fd, "wb"))
            return cls(transport)  # type: ignore[arg-type]
        out = cls(None, os.fdopen(fd, "wb", buffering=1 << 16))
        out._schedule_flush(loop)
        return out

    def _schedule_flush(self, loop: asyncio.AbstractEventLoop) -> None:
        def flush() -> None:
            self.file.flush()
            self._schedule_flush(loop)

        self._flusher = loop.call_later(0.25, flush)

    def emit(self, ev: Event) -> None:
        data = dump_event(ev).encode() + b"\n"
        if self.transport is not None:
            self.transport.write(data)
        else:
            self.file.write(data)

    async def close(self) -> None:
        if self.transport is not None:
            while self.transport.get_write_buffer_size():
                await asyncio.sleep(0.01)
            self.transport.close()
        else:
            if self._flusher is not None:
                self._flusher.cancel()
            self.file.flush()
            self.file.close()


def _raise_fd_limit() -> None:
    """One socket per in-flight request: C=1024 needs more than the usual soft limit of 1024."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):  # pragma: no cover - not on every platform
        pass


def _read_first_line() -> str:
    """Byte by byte, so nothing after the first line sits in a buffer the async reader cannot see."""
    buf = bytearray()
    fd = sys.stdin.fileno()
    while True:
        b = os.read(fd, 1)
        if not b or b == b"\n":
            return buf.decode()
        buf += b


def main() -> int:
    line = _read_first_line()
    try:
        cfg = _parse_config(line)
    except Exception as exc:
        msg = f"bad sweep config: {exc}"
        sys.stdout.write(dump_event(ErrorEvent(source="sweep", message=msg)) + "\n")
        sys.stdout.write(dump_event(SweepResult(sweep_id="", outcome="failed", reason=msg)) + "\n")
        sys.stdout.flush()
        return 2
    _raise_fd_limit()
    gc.freeze()  # imports are done: keep the collector off the long-lived objects during the sweep
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return asyncio.run(_amain(cfg))
    return uvloop.run(_amain(cfg))


if __name__ == "__main__":
    sys.exit(main())
