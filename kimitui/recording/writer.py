"""Writing a recording: an append-only Session sink, flushed by a thread, compressed while it records."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kimitui.events import (
    Event,
    LevelResult,
    LevelStarted,
    ProfileState,
    ProfileSwitch,
    SweepProgress,
    SweepResult,
    SweepStarted,
)
from kimitui.private_files import FILE_MODE, private_dir
from kimitui.recording.format import PathLike, RecordingError, RecordingHeader

log = logging.getLogger(__name__)

MEMBER_BYTES = 1 << 20
"""Uncompressed bytes per gzip member: a damaged byte costs at most the rest of its member
(readers resume at the next one), a member's CRC checks what it holds, and a replay finds any line by
decoding its member alone (1 MB: ~3 ms; the file is 0.6 % bigger than with 4 MB members)."""

PROGRESS_INTERVAL_S = 1.0
"""A recording keeps at most one ``sweep_progress`` per sweep and second (the Session gets every one)."""


def dump_line(event: Event) -> str:
    """One event as a recording line (no newline): ``dump_event`` with the recording's compact forms."""
    return event.model_dump_json(context={"recording": True})


class RecordingWriter:
    """Append-only recorder; use as a Session sink: ``session.add_sink(writer)``.

    ``writer(event)`` only appends to a buffer.  ``start()`` runs a daemon flusher
    thread (a thread, not an asyncio task, so a busy UI loop cannot delay it and
    it works with no loop at all); a buffer reaching ``max_buffer`` events wakes
    it early.  Without ``start()`` the sink itself flushes when the buffer
    reaches ``max_buffer`` or ``flush_interval`` has passed since the last
    flush; ``close()`` always flushes.

    The file is the path named.  A name ending in ``.gz`` is written as gzip while
    recording: each flush ends with a zlib sync flush (so everything flushed can be
    decoded, even after a ``kill -9``), and a new gzip member starts every
    ``MEMBER_BYTES``.  ``close()`` writes the replay index beside the file (``.NAME.idx``).  Level 9 by default: 6 % smaller than 6 on a realistic session for about
    0.1 % of a core (bench/bench_recording.py --size-only).  ``rename``, given the profiles the recording saw, names the
    file on close (the cockpit's default names list every profile that ran).
    """

    def __init__(
        self,
        path: PathLike,
        *,
        hosts: list[str],
        meta: dict[str, Any] | None = None,
        compress: bool | None = None,
        flush_interval: float = 0.5,
        max_buffer: int = 5000,
        progress_interval: float = PROGRESS_INTERVAL_S,
        rename: Callable[[list[str]], PathLike] | None = None,
        compresslevel: int = 9,
        index: bool = True,
    ) -> None:
        self.path = Path(path)
        gz = self.path.name.endswith(".gz")
        if compress is not None and compress != gz:
            raise ValueError(f"{self.path}: compress={compress} but the name {'ends' if gz else 'does not end'} "
                             "in .gz; a recording is compressed exactly when its name ends in .gz")
        self.compress = gz
        self.flush_interval = flush_interval
        self.max_buffer = max_buffer
        self.progress_interval = progress_interval
        self.header = RecordingHeader(hosts=list(hosts), meta=dict(meta or {}))
        self.paused = False
        """While True, events are not recorded (the operator's record toggle)."""
        self.events_written = 0
        self.events_repr = 0
        """Events with a value JSON cannot hold, written with that value's repr instead."""
        self.progress_dropped = 0
        """``sweep_progress`` events left out of the file (more than one per ``progress_interval``)."""
        self.profiles: list[str] = []
        """Profiles that ran while recording, in the order they first did."""
        self.bytes_in = 0
        """Uncompressed bytes written so far (the header included)."""
        self.error: str | None = None
        """The last write error (disk full...); the unwritten bytes are kept and retried."""
        self._rename = rename
        self._index = index
        self.index_status: str | None = None
        """What writing the replay index on close did (``.NAME.idx``; None before close or without one)."""
        self._level = compresslevel
        self._buf: list[Event] = []
        self._progress: dict[tuple[str, str], tuple[float, SweepProgress | None]] = {}
        """(host, sweep) -> (time of the last kept progress, the newest one held back)."""
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._last_flush = time.monotonic()
        self._closed = False
        self._stop = threading.Event()
        self._kick = threading.Event()
        self._thread: threading.Thread | None = None
        self._z: zlib._Compress | None = None
        """The gzip member being written (``None`` between members)."""
        self._member_in = 0
        self._unwritten = b""
        private_dir(self.path.parent)
        if self.path.exists() and self.path.stat().st_size > 0:
            raise RecordingError(f"{self.path}: already exists; refusing to overwrite a recording")
        # 0600: a recording keeps the server's args and launch command (secrets are *** there, the rest is not public)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        if stat.S_ISREG(os.fstat(self._fd).st_mode):  # an empty file already there (never /dev/null)
            os.fchmod(self._fd, FILE_MODE)
        self._write(self.header.model_dump_json().encode() + b"\n")

    # -- the sink --------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        if self._closed or self.paused:
            return
        with self._lock:
            if isinstance(event, SweepProgress):
                if not self._keep_progress(event):
                    return
            elif isinstance(event, (LevelStarted, LevelResult, SweepResult)):
                self._release_progress(event.host, event.sweep_id)
                if isinstance(event, LevelStarted):
                    self._progress.pop((event.host, event.sweep_id), None)  # a level's first progress is kept
            if isinstance(event, (ProfileSwitch, ProfileState, SweepStarted)):
                self._note_profile(event)
            self._buf.append(event)
            n = len(self._buf)
        if self._thread is not None:
            if n >= self.max_buffer:
                self._kick.set()  # the flusher writes now; the publisher never waits on the disk
        elif n >= self.max_buffer or time.monotonic() - self._last_flush >= self.flush_interval:
            self.flush()

    def _keep_progress(self, event: SweepProgress) -> bool:
        """At most one progress per sweep and ``progress_interval``; the newest held back is kept for later.

        The held-back one is written before the level's end (or the next level, or the sweep's
        result, or on close), so the last progress of every level is in the file.
        """
        key = (event.host, event.sweep_id)
        last = self._progress.get(key)
        if last is not None and last[1] is not None and last[1].concurrency != event.concurrency:
            self._buf.append(last[1])  # the previous level's last progress; this one starts a level
            self.progress_dropped -= 1
            last = None
        if last is None or event.t - last[0] >= self.progress_interval or event.t < last[0]:
            self._progress[key] = (event.t, None)
            return True
        self._progress[key] = (last[0], event)
        self.progress_dropped += 1
        return False

    def _release_progress(self, host: str, sweep_id: str) -> None:
        last = self._progress.get((host, sweep_id))
        if last is not None and last[1] is not None:
            self._buf.append(last[1])
            self.progress_dropped -= 1
            self._progress[(host, sweep_id)] = (last[1].t, None)

    def _note_profile(self, event: Event) -> None:
        name: str | None = None
        if isinstance(event, ProfileSwitch):
            name = event.to_profile if event.outcome == "ok" else None
        elif isinstance(event, ProfileState):
            name = event.profile if event.state == "serving" else None
        elif isinstance(event, SweepStarted):
            name = event.profile
        if name and name not in self.profiles:
            self.profiles.append(name)

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
        """Write buffered events as whole lines (compressed and sync-flushed); returns how many."""
        with self._write_lock:
            with self._lock:
                buf, self._buf = self._buf, []
            self._last_flush = time.monotonic()
            if not buf or self._fd < 0:
                return 0
            self._write("".join(self._line(ev) for ev in buf).encode())
            self.events_written += len(buf)
            return len(buf)

    def _write(self, data: bytes, finish: bool = False) -> None:
        """Compress (if gzip) and write ``data``; bytes the disk refused are kept and retried next time."""
        self.bytes_in += len(data)
        if self.compress:
            data = self._compress(data, finish)
        pending = memoryview(self._unwritten + data)
        try:
            while pending:
                pending = pending[os.write(self._fd, pending):]
        except OSError as exc:
            self.error = f"{self.path}: {exc}"
            log.error("recording write failed: %s", self.error)
        else:
            self.error = None
        self._unwritten = bytes(pending)

    def _compress(self, data: bytes, finish: bool) -> bytes:
        """``data`` as gzip: a member ends (at a line end) once it holds ``MEMBER_BYTES``, however much one
        flush writes (a whole recording written at once is still members of ~1 MB, each decodable alone);
        otherwise a sync flush, so everything written so far decodes without the rest."""
        out: list[bytes] = []
        view = memoryview(data)
        pos, n = 0, len(data)
        while True:
            room = MEMBER_BYTES - self._member_in
            cut = n
            if n - pos > room:  # end this member at the last line end that fits (or the first after, for a long line)
                cut = (data.rfind(b"\n", pos, pos + room) + 1) or (data.find(b"\n", pos + room) + 1) or n
            if self._z is None:
                self._z = zlib.compressobj(self._level, zlib.DEFLATED, 31)
            out.append(self._z.compress(view[pos:cut]))
            self._member_in += cut - pos
            pos = cut
            if pos < n or finish or self._member_in >= MEMBER_BYTES:
                out.append(self._z.flush(zlib.Z_FINISH))  # a whole member: its CRC checks what it holds
                self._z, self._member_in = None, 0
            else:
                out.append(self._z.flush(zlib.Z_SYNC_FLUSH))  # decodable up to here without the rest
            if pos >= n:
                return b"".join(out)

    def _line(self, event: Event) -> str:
        """One event as a line; a value JSON cannot hold (bytes, a set...) is written as its repr."""
        try:
            return dump_line(event) + "\n"
        except Exception:
            self.events_repr += 1
            return event.model_dump_json(fallback=repr, context={"recording": True}) + "\n"

    # -- closing ---------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def final_path(self) -> Path:
        """The file on disk (kept for callers of the time the writer renamed on close)."""
        return self.path

    def close(self) -> Path:
        """Flush, end the gzip stream, close, and rename if asked; returns the path on disk. Idempotent."""
        if self._closed:
            return self.path
        self._closed = True
        self._stop.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            for _, held in self._progress.values():
                if held is not None:
                    self._buf.append(held)
                    self.progress_dropped -= 1
            self._progress.clear()
        self.flush()
        with self._write_lock:
            if self.compress and self._z is not None:
                self._write(b"", finish=True)
            os.close(self._fd)
            self._fd = -1
        if self._unwritten:
            raise RecordingError(f"{self.path}: {len(self._unwritten)} bytes could not be written: {self.error}")
        if self._rename is not None:
            self._rename_to(Path(self._rename(list(self.profiles))))
        if self._index:
            self._write_index()
        return self.path

    def _write_index(self) -> None:
        """The replay index beside the closed file, so a replay opens and seeks without scanning it.

        Built by the reader's own scan of the file as written (one code path: what a reader would
        build is what it finds); a failure is logged, never raised: the recording itself is whole."""
        from kimitui.recording.index import RecordingIndex  # the index reads recordings; it never writes one

        self.index_status = RecordingIndex.write_index(self.path)
        log.debug("recording %s: index %s", self.path, self.index_status)

    def _rename_to(self, target: Path) -> None:
        if target == self.path:
            return
        if target.exists():
            log.warning("recording not renamed to %s: that file exists", target)
            return
        try:
            os.rename(self.path, target)
        except OSError as exc:
            log.warning("recording not renamed to %s: %s", target, exc)
            return
        self.path = target

    async def aclose(self) -> Path:
        """``close()`` off the event loop."""
        return await asyncio.to_thread(self.close)

    def __enter__(self) -> "RecordingWriter":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_recording(path: PathLike, events: list[Event], *, hosts: list[str] | None = None,
                    meta: dict[str, Any] | None = None, compress: bool | None = None) -> Path:
    """Write a whole recording at once (tests, exports); returns its path.

    ``compress=True`` on a name without ``.gz`` appends ``.gz`` (``False`` drops it): a
    program's wish, where a person's named path is always written as named.
    """
    p = Path(path)
    if compress is True and not p.name.endswith(".gz"):
        p = p.with_name(p.name + ".gz")
    elif compress is False and p.name.endswith(".gz"):
        p = p.with_name(p.name[:-3])
    writer = RecordingWriter(p, hosts=hosts if hosts is not None else sorted({e.host for e in events}),
                             meta=meta, max_buffer=1 << 30, progress_interval=0.0)
    for ev in events:
        writer(ev)
    return writer.close()
