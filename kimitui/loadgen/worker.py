"""The load process: ``python -m kimitui.loadgen.worker``.

Runs a sweep on its own uvloop event loop so nothing the parent does (TUI
rendering, recording) can delay a chunk's timestamp.

Protocol (all JSON lines):

* stdin, first line: ``{"spec": {...SweepSpec...}, "sweep_id": str, "host": str, "profile": str|null}``.
* stdin, later lines: ``abort`` aborts the sweep.  End of stdin (the parent
  went away) aborts it too.  A helper of a shared level (a ``shard`` in the first line,
  :mod:`kimitui.loadgen.shards`) also reads ``cancel`` (cut the level) and ``stop`` (send no more).
* stdout: one event per line (:func:`kimitui.events.dump_event`), ending with
  a ``sweep_result``.  Writes go through a non-blocking pipe transport, so a
  slow reader never stalls the load loop, gathered for up to 20 ms (:data:`FLUSH_S`) into one write.
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
from typing import Any, BinaryIO

from kimitui.events import ErrorEvent, Event, LevelStarted, SweepResult, SweepSpec, dump_event
from kimitui.loadgen import modes
from kimitui.loadgen.sweep import SweepEngine


def _parse_config(line: str) -> dict[str, Any]:
    cfg = json.loads(line)
    if not isinstance(cfg, dict) or "spec" not in cfg:
        raise ValueError("first stdin line must be a JSON object with a 'spec'")
    cfg["spec"] = SweepSpec.model_validate(cfg["spec"])
    return cfg


async def _amain(cfg: dict[str, Any]) -> int:
    loop = asyncio.get_running_loop()
    out = await _EventOut.open(loop)
    warnings: dict[int, str] = dict(cfg.get("fd_warnings") or {})
    host = cfg.get("host") or "sim"

    def emit(ev: Event) -> None:
        """The engine's events, with a level's file-limit warning said just before it starts (once)."""
        if warnings and isinstance(ev, LevelStarted) and ev.concurrency in warnings:
            out.emit(ErrorEvent(host=host, source="sweep", severity="warning",
                                message=warnings.pop(ev.concurrency)))
        out.emit(ev)

    engine = SweepEngine(cfg["spec"], emit, sweep_id=cfg.get("sweep_id"), host=host,
                         profile=cfg.get("profile"), progress_hz=float(cfg.get("progress_hz") or 4.0))

    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def control() -> None:
        while True:
            line = await reader.readline()
            if not line:
                engine.abort("control pipe closed (parent gone)")
                return
            command = line.strip()
            if command == b"abort":
                engine.abort()
            elif command == b"cancel":
                engine.cancel_level()
            elif command == b"stop":
                engine.stop_dispatch()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, engine.abort, f"signal {sig.name}")
    ctl = loop.create_task(control())
    try:
        if cfg.get("shard"):
            await engine.run_shard(**cfg["shard"])
        else:
            await engine.run()
    finally:
        ctl.cancel()
        await out.close()
    return 0


FLUSH_S = 0.02
"""How long an event line waits for others before they go to the pipe in one write.  One write per event cost
~3 % of the worker's CPU at C=2048 (py-spy: the pipe write was the largest difference from the bare client,
~8,400 writes of 0.3-5 KB, each waking the reader); 20 ms is far below what the cockpit's refresh shows."""
FLUSH_BYTES = 1 << 18
"""...or sooner, once this much waits (a burst of results at a level's end)."""


class _EventOut:
    """Event lines to stdout without ever blocking the load loop.

    A pipe (the normal case: :class:`~kimitui.loadgen.runner.SweepRunner`) gets a
    non-blocking pipe transport that buffers if the reader is slow, written every :data:`FLUSH_S` (or
    :data:`FLUSH_BYTES`); a regular file (``> events.jsonl``) or a terminal gets a buffered file flushed a
    few times a second.
    """

    def __init__(self, transport: asyncio.WriteTransport | None, file: BinaryIO | None = None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Exactly one of the two: a pipe's transport (with its loop), or a file (a regular file or a terminal)."""
        self.transport = transport
        self.file = file
        self._loop = loop
        self._flusher: asyncio.TimerHandle | None = None
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    @classmethod
    async def open(cls, loop: asyncio.AbstractEventLoop) -> "_EventOut":
        fd = os.dup(sys.stdout.fileno())
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            transport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(fd, "wb"))
            return cls(transport, loop=loop)
        out = cls(None, os.fdopen(fd, "wb", buffering=1 << 16))
        out._schedule_flush(loop)
        return out

    def _schedule_flush(self, loop: asyncio.AbstractEventLoop) -> None:
        def flush() -> None:
            if self.file is not None:
                self.file.flush()
            self._schedule_flush(loop)

        self._flusher = loop.call_later(0.25, flush)

    def emit(self, ev: Event) -> None:
        data = dump_event(ev).encode() + b"\n"
        if self.transport is not None:
            self._pending.append(data)
            self._pending_bytes += len(data)
            if self._pending_bytes >= FLUSH_BYTES:
                self._write_pending()
            elif self._flusher is None and self._loop is not None:
                self._flusher = self._loop.call_later(FLUSH_S, self._write_pending)
        elif self.file is not None:
            self.file.write(data)

    def _write_pending(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        if self._pending and self.transport is not None:
            self.transport.write(b"".join(self._pending))
        self._pending.clear()
        self._pending_bytes = 0

    async def close(self) -> None:
        if self.transport is not None:
            self._write_pending()
            while self.transport.get_write_buffer_size():
                await asyncio.sleep(0.01)
            self.transport.close()
        elif self.file is not None:
            if self._flusher is not None:
                self._flusher.cancel()
            self.file.flush()
            self.file.close()


FD_HEADROOM = 12
"""File descriptors a level needs beyond one socket per in-flight request and those open at start
(the event loop, its pipes, the control-plane client).  Measured: a C=96 burst under a limit of
96 + 14 had no connect failures, and each descriptor fewer failed one request more (as C=1024
under ``ulimit -n 1024`` failed 14)."""


def _open_fds() -> int:
    """How many file descriptors this process holds now (Linux, macOS); a guess elsewhere."""
    for d in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(d)) - 1  # the listing's own descriptor
        except OSError:
            continue
    return FD_HEADROOM  # pragma: no cover


def _raise_fd_limit(need: int = 0) -> tuple[int | None, int | None]:
    """One socket per in-flight request: C=1024 needs more than the usual soft limit of 1024.

    Raises the soft limit to the hard one (to ``need`` at least when the hard
    limit is unlimited, where Linux refuses "unlimited" for the soft one).
    Returns the (soft, hard) limits after, None for unlimited or unknown.
    """
    try:
        import resource  # here, where its absence is handled: not on every platform
    except ImportError:  # pragma: no cover - not on every platform
        return None, None
    inf = resource.RLIM_INFINITY
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != inf and (hard == inf or soft < hard):
            targets = [hard] if hard != inf else [max(soft, need, 1 << 20), max(soft, need, 65536)]
            for target in targets:
                try:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                    break
                except (ValueError, OSError):
                    continue
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ValueError, OSError):  # pragma: no cover
        return None, None
    return (None if soft == inf else soft), (None if hard == inf else hard)


def fd_warnings(levels: list[int], soft: int | None, hard: int | None, open_now: int) -> dict[int, str]:
    """For each level the file limit cannot carry, the warning said just before it starts."""
    out: dict[int, str] = {}
    if soft is None:
        return out
    for c in sorted(set(levels)):
        need = c + max(open_now, 3) + FD_HEADROOM
        if need <= soft:
            continue
        if hard is not None and soft >= hard:
            out[c] = (f"C={c} needs ~{need} file descriptors; the hard limit is {hard}: raise it "
                      f"(`ulimit -Hn {need}` as root, or nofile in /etc/security/limits.conf) "
                      "or expect connect failures")
        else:
            out[c] = (f"C={c} needs ~{need} file descriptors; the limit could only be raised to {soft} "
                      f"(hard limit {hard if hard is not None else 'unlimited'}): expect connect failures")
    return out


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
    spec: SweepSpec = cfg["spec"]
    soft, hard = _raise_fd_limit(max(spec.levels, default=0) + 64)
    cfg["fd_warnings"] = fd_warnings(spec.levels, soft, hard, _open_fds())
    gc.freeze()  # imports are done: keep the collector off the long-lived objects during the sweep
    modes.OWNS_COLLECTOR = True  # this process is the load worker's own: each level's ramp is frozen too
    try:
        import uvloop  # here, where its absence is handled: optional (not on Windows)
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return asyncio.run(_amain(cfg))
    return uvloop.run(_amain(cfg))


if __name__ == "__main__":
    sys.exit(main())
