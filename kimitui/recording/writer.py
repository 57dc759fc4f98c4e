"""Writing a recording: an append-only Session sink, flushed by a thread, gzipped on close."""

from __future__ import annotations

import gzip
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from kimitui.events import Event, dump_event
from kimitui.recording.format import (
    PathLike,
    RecordingError,
    RecordingHeader,
    final_path,
    live_path,
)

log = logging.getLogger(__name__)


class RecordingWriter:
    """Append-only recorder; use as a Session sink: ``session.add_sink(writer)``.

    ``writer(event)`` only appends to a buffer.  ``start()`` runs a daemon flusher
    thread (a thread, not an asyncio task, so a busy UI loop cannot delay it and
    it works with no loop at all); a buffer reaching ``max_buffer`` events wakes
    it early.  Without ``start()`` the sink itself flushes when the buffer
    reaches ``max_buffer`` or ``flush_interval`` has passed since the last
    flush; ``close()`` always flushes.
    """

    def __init__(
        self,
        path: PathLike,
        *,
        hosts: list[str],
        meta: dict[str, Any] | None = None,
        compress: bool = True,
        flush_interval: float = 0.5,
        max_buffer: int = 5000,
    ) -> None:
        self.path = live_path(path)
        self.final_path: Path = final_path(path) if compress else self.path
        self.compress = compress
        self.flush_interval = flush_interval
        self.max_buffer = max_buffer
        self.header = RecordingHeader(hosts=list(hosts), meta=dict(meta or {}))
        self.paused = False
        """While True, events are not recorded (the operator's record toggle)."""
        self.events_written = 0
        self.events_repr = 0
        """Events with a value JSON cannot hold, written with that value's repr instead."""
        self.error: str | None = None
        """The last write error (disk full...); the buffer is kept and retried."""
        self._buf: list[Event] = []
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._last_flush = time.monotonic()
        self._closed = False
        self._stop = threading.Event()
        self._kick = threading.Event()
        self._thread: threading.Thread | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for existing in {self.path, self.final_path}:
            if existing.exists() and existing.stat().st_size > 0:
                raise RecordingError(f"{existing}: already exists; refusing to overwrite a recording")
        self._file = open(self.path, "ab")  # noqa: SIM115 - closed in close()
        self._file.write(self.header.model_dump_json().encode() + b"\n")
        self._file.flush()

    # -- the sink --------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        if self._closed or self.paused:
            return
        with self._lock:
            self._buf.append(event)
            n = len(self._buf)
        if self._thread is not None:
            if n >= self.max_buffer:
                self._kick.set()  # the flusher writes now; the publisher never waits on the disk
        elif n >= self.max_buffer or time.monotonic() - self._last_flush >= self.flush_interval:
            self.flush()

    # -- flushing --------------------------------------------------------------
    def start(self) -> "RecordingWriter":
        """Start the background flusher (idempotent); returns self."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name=f"recorder:{self.path.name}", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self._kick.wait(self.flush_interval)
            self._kick.clear()
            try:
                self.flush()
            except Exception:  # the flusher must outlive any one bad batch
                log.exception("recording flush failed")

    def flush(self) -> int:
        """Write buffered events as whole lines; returns how many were written."""
        with self._write_lock:
            with self._lock:
                buf, self._buf = self._buf, []
            self._last_flush = time.monotonic()
            if not buf or self._file.closed:
                return 0
            data = "".join(self._line(ev) for ev in buf).encode()
            try:
                self._file.write(data)
                self._file.flush()
            except OSError as exc:  # keep the events; retry on the next flush
                self.error = f"{self.path}: {exc}"
                log.error("recording write failed: %s", self.error)
                with self._lock:
                    self._buf[:0] = buf
                return 0
            self.error = None
            self.events_written += len(buf)
            return len(buf)

    def _line(self, event: Event) -> str:
        """One event as a line; a value JSON cannot hold (bytes, a set...) is written as its repr."""
        try:
            return dump_event(event) + "\n"
        except Exception:
            self.events_repr += 1
            return event.model_dump_json(fallback=repr) + "\n"

    # -- closing ---------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> Path:
        """Flush, close and (if ``compress``) gzip; returns the final path. Idempotent."""
        if self._closed:
            return self.final_path
        self._closed = True
        self._stop.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.flush()
        self._file.close()
        if self.compress and self.final_path != self.path:
            tmp = self.final_path.with_name(self.final_path.name + ".tmp")
            with open(self.path, "rb") as src, gzip.open(tmp, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(tmp, self.final_path)
            self.path.unlink()
        return self.final_path

    async def aclose(self) -> Path:
        """``close()`` off the event loop (compressing an hour takes a moment)."""
        import asyncio

        return await asyncio.to_thread(self.close)

    def __enter__(self) -> "RecordingWriter":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_recording(path: PathLike, events: list[Event], *, hosts: list[str] | None = None,
                    meta: dict[str, Any] | None = None, compress: bool = True) -> Path:
    """Write a whole recording at once (tests, exports); returns the final path."""
    writer = RecordingWriter(path, hosts=hosts if hosts is not None else sorted({e.host for e in events}),
                             meta=meta, compress=compress, max_buffer=1 << 30)
    for ev in events:
        writer(ev)
    return writer.close()
