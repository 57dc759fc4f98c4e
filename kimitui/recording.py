"""Recordings: every event of a session, on disk, crash-safe and small.

Format (see ``docs/recording-format.md``): JSON Lines.  Line 1 is a
:class:`RecordingHeader`; every other line is one event as written by
:func:`kimitui.events.dump_event`, in the order the Session published them.

Life of a file:

* while a session runs, :class:`RecordingWriter` appends to ``X.jsonl``.  Events
  are buffered in memory by the sink call (O(1), never blocks) and written as
  whole lines by a flusher thread at least every ``flush_interval`` seconds
  (and at once when the buffer grows large), so a ``kill -9`` loses at most the
  last second and the file is readable while being written;
* :meth:`RecordingWriter.close` flushes, then gzips ``X.jsonl`` into
  ``X.jsonl.gz`` (via a temp file + rename) and removes the plain file.  A crash
  during compression leaves the plain file intact.

Readers accept either form (and find ``X.jsonl.gz`` when given ``X.jsonl``
after it was compressed).  A truncated last line (a crash mid-write, or a
writer still running) and malformed lines in the middle are skipped and
reported with their line numbers; the rest is never lost.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import shutil
import threading
import time
import zlib
from bisect import bisect_left, bisect_right
from itertools import accumulate
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kimitui import __version__
from kimitui.events import Event, SweepSpec, SweepStarted, dump_event, parse_event

log = logging.getLogger(__name__)

FORMAT_NAME = "kimitui-recording"
FORMAT_VERSION = 1

PathLike = str | os.PathLike[str]


class RecordingError(Exception):
    """A file that is not a readable recording; the message names the file and line."""


class RecordingHeader(BaseModel):
    """Line 1 of every recording."""

    model_config = ConfigDict(extra="allow")

    format: Literal["kimitui-recording"] = FORMAT_NAME
    version: int = FORMAT_VERSION
    kimitui: str = __version__
    hosts: list[str] = Field(default_factory=list)
    started: float = Field(default_factory=time.time)
    """Wall-clock seconds when the writer was created."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Free-form: the command line, profile, sweep spec... whatever the writer's owner adds."""


@dataclass(frozen=True)
class SkippedLine:
    line_no: int
    """1-based line number in the (decompressed) file."""
    reason: str


@dataclass
class Recording:
    """A whole recording in memory."""

    header: RecordingHeader
    events: list[Event]
    skipped: list[SkippedLine] = field(default_factory=list)
    path: Path | None = None


# --------------------------------------------------------------------------- paths


def final_path(path: PathLike) -> Path:
    """Where a closed (compressed) recording ends up: ``X.jsonl`` -> ``X.jsonl.gz``."""
    p = Path(path)
    return p if p.name.endswith(".gz") else p.with_name(p.name + ".gz")


def live_path(path: PathLike) -> Path:
    """Where a running writer appends: ``X.jsonl.gz`` -> ``X.jsonl``."""
    p = Path(path)
    return p.with_name(p.name[:-3]) if p.name.endswith(".gz") else p


def resolve_path(path: PathLike) -> Path:
    """The file that holds the recording ``path`` names (plain or compressed)."""
    p = Path(path)
    if p.exists():
        return p
    for alt in (final_path(p), live_path(p)):
        if alt.exists():
            return alt
    raise RecordingError(f"{p}: no such recording")


_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def default_recording_path(host: str, profile: str | None, *, base: PathLike | None = None,
                           when: float | None = None) -> Path:
    """``<data dir>/recordings/<host>-<YYYYmmdd-HHMMSS>-<profile>.jsonl`` (live name; ``.gz`` on close).

    ``base`` replaces ``platformdirs.user_data_dir("kimitui")`` (tests, ``--data-dir``).
    """
    if base is None:
        import platformdirs

        base = platformdirs.user_data_dir("kimitui")
    stamp = datetime.fromtimestamp(time.time() if when is None else when).strftime("%Y%m%d-%H%M%S")
    name = f"{_SAFE.sub('_', host) or 'host'}-{stamp}-{_SAFE.sub('_', profile or 'none')}.jsonl"
    return Path(base) / "recordings" / name


# --------------------------------------------------------------------------- writing


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
            self.flush()

    def flush(self) -> int:
        """Write buffered events as whole lines; returns how many were written."""
        with self._write_lock:
            with self._lock:
                buf, self._buf = self._buf, []
            self._last_flush = time.monotonic()
            if not buf or self._file.closed:
                return 0
            data = "".join(dump_event(ev) + "\n" for ev in buf).encode()
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


# --------------------------------------------------------------------------- reading


def _gunzip(data: bytes) -> bytes:
    """Decompress every gzip member; a stream cut short yields what was decodable."""
    out: list[bytes] = []
    while data:
        d = zlib.decompressobj(wbits=31)
        try:
            out.append(d.decompress(data))
        except zlib.error:
            break
        if not d.eof:  # truncated (a crash while compressing): keep what was there
            break
        data = d.unused_data
    return b"".join(out)


def _open_bytes(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read: {exc}") from exc
    return _gunzip(data) if data[:2] == b"\x1f\x8b" else data


def _parse_header(path: Path, first: bytes) -> RecordingHeader:
    if not first.strip():
        raise RecordingError(f"{path}: line 1: empty; a recording starts with a header line")
    try:
        data = json.loads(first)
    except ValueError as exc:
        raise RecordingError(f"{path}: line 1: not JSON ({exc}); not a kimitui recording") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise RecordingError(f"{path}: line 1: header field 'format' is not {FORMAT_NAME!r}; not a kimitui recording")
    try:
        header = RecordingHeader.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise RecordingError(f"{path}: line 1: header field {loc!r}: {err['msg']}") from exc
    if header.version > FORMAT_VERSION:
        raise RecordingError(
            f"{path}: line 1: format version {header.version} is newer than this kimitui reads "
            f"({FORMAT_VERSION}); upgrade kimitui")
    return header


def parse_line(raw: bytes | str) -> Event:
    """One event line; a NaN or infinity the writer had to write as ``null`` comes back as NaN.

    (pydantic writes non-finite floats as ``null``, which a required float field then rejects:
    without this repair the whole event would be lost.  Optional fields read back as None.)
    """
    try:
        return parse_event(raw)
    except ValidationError as exc:
        repaired = _repair_non_finite(raw, exc)
        if repaired is None:
            raise
        return repaired


def _repair_non_finite(raw: bytes | str, exc: ValidationError) -> Event | None:
    errors = exc.errors()
    if not errors or any(e["type"] != "float_type" or e.get("input", 0) is not None for e in errors):
        return None
    try:
        data = json.loads(raw)
        for err in errors:
            loc = err["loc"][1:]  # loc[0] is the union's tag (the kind)
            target = data
            for key in loc[:-1]:
                target = target[key]
            target[loc[-1]] = float("nan")
        return parse_event(data)
    except (ValueError, KeyError, IndexError, TypeError, ValidationError):
        return None


def _event_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    return f"field {loc!r}: {err['msg']}" if loc else err["msg"]


class RecordingReader:
    """Streams a recording: ``header`` is read on construction; iterate for events.

    ``skipped`` fills in as iteration passes bad lines.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = resolve_path(path)
        self._data = _open_bytes(self.path)
        self._lines = self._data.split(b"\n")
        self.header = _parse_header(self.path, self._lines[0])
        self.skipped: list[SkippedLine] = []

    def __iter__(self) -> Iterator[Event]:
        lines = self._lines
        last = len(lines) - 1  # the text after the final newline: b"" unless truncated
        for i in range(1, len(lines)):
            raw = lines[i]
            if i == last:
                if raw.strip():
                    self.skipped.append(SkippedLine(i + 1, "truncated last line (no newline): "
                                                    "the writer crashed or is still writing"))
                break
            if not raw.strip():
                continue
            try:
                yield parse_line(raw)
            except ValidationError as exc:
                self.skipped.append(SkippedLine(i + 1, _event_error(exc)))


def iter_recording(path: PathLike) -> RecordingReader:
    """The streaming reader: ``for ev in iter_recording(p)``; ``.header`` and ``.skipped`` on it."""
    return RecordingReader(path)


def read_recording(path: PathLike) -> Recording:
    """Read a whole recording; bad lines are skipped and listed in ``.skipped``."""
    reader = RecordingReader(path)
    events = list(reader)
    return Recording(header=reader.header, events=events, skipped=reader.skipped, path=reader.path)


def load_recording(source: "Recording | PathLike") -> Recording:
    return source if isinstance(source, Recording) else read_recording(source)


def spec_from_recording(source: "Recording | PathLike", sweep_id: str | None = None) -> SweepSpec:
    """The workload of a recorded sweep (the last one, or ``sweep_id``), for ``sweep --like``."""
    rec = load_recording(source)
    starts = [e for e in rec.events if isinstance(e, SweepStarted) and (sweep_id is None or e.sweep_id == sweep_id)]
    if not starts:
        what = f"sweep {sweep_id!r}" if sweep_id else "no sweep"
        where = rec.path or "recording"
        raise RecordingError(f"{where}: {what} found (no sweep_started event)" if sweep_id
                             else f"{where}: contains no sweep (no sweep_started event)")
    return starts[-1].spec


# --------------------------------------------------------------------------- the index

_PREFIX = re.compile(rb'\{"kind":"([a-z_]+)","t":(-?[0-9.]+(?:[eE][-+]?[0-9]+)?),"host":"((?:[^"\\]|\\.)*)"')


class RecordingIndex:
    """Random access to a recording without parsing every event up front.

    Opening reads the bytes and takes each line's ``kind`` and ``t`` from its
    prefix (``dump_event`` always starts ``{"kind":..,"t":..``); events are
    parsed on first access and cached.  ``times`` is the running maximum of
    ``t`` (play order is file order; a source's late timestamp never makes
    time run backwards), so it is sorted and seekable by bisection.
    """

    def __init__(self, header: RecordingHeader, lines: list[bytes | Event], times: list[float],
                 kinds: list[str], hosts: list[str], line_nos: list[int], skipped: list[SkippedLine],
                 path: Path | None) -> None:
        self.header = header
        self._items = lines
        self.times = times
        self.kinds = kinds
        self.hosts = hosts
        self.line_nos = line_nos
        self.skipped = skipped
        self.path = path
        self._bad: set[int] = set()

    # -- building ---------------------------------------------------------------
    @classmethod
    def open(cls, path: PathLike) -> "RecordingIndex":
        p = resolve_path(path)
        lines = _open_bytes(p).split(b"\n")
        header = _parse_header(p, lines[0])
        skipped: list[SkippedLine] = []
        tail = lines.pop()  # the text after the final newline: empty unless the last line is cut
        if tail.strip():
            skipped.append(SkippedLine(len(lines) + 1, "truncated last line (no newline): "
                                       "the writer crashed or is still writing"))
        body = lines[1:]
        matches = list(map(_PREFIX.match, body))  # the common case, at C speed
        if all(m is not None for m in matches) and not any(b"\\" in m[3] for m in matches):  # type: ignore[index]
            names = {k: k.decode() for k in {m[1] for m in matches}}  # type: ignore[index]
            hostnames = {h: h.decode() for h in {m[3] for m in matches}}  # type: ignore[index]
            items: list[bytes | Event] = body  # type: ignore[assignment]
            kinds = [names[m[1]] for m in matches]  # type: ignore[index]
            hosts = [hostnames[m[3]] for m in matches]  # type: ignore[index]
            times = list(accumulate((float(m[2]) for m in matches), max))  # type: ignore[index]
            return cls(header, items, times, kinds, hosts, list(range(2, len(body) + 2)), skipped, p)
        return cls._open_slow(header, body, matches, skipped, p)

    @classmethod
    def _open_slow(cls, header: RecordingHeader, body: list[bytes], matches: list[re.Match[bytes] | None],
                   skipped: list[SkippedLine], p: Path) -> "RecordingIndex":
        """Line by line: blank lines, hand-written or reordered JSON, malformed lines."""
        items: list[bytes | Event] = []
        times: list[float] = []
        kinds: list[str] = []
        hosts: list[str] = []
        line_nos: list[int] = []
        tmax = float("-inf")
        for i, (raw, m) in enumerate(zip(body, matches), start=2):
            item: bytes | Event = raw
            if m is not None and b"\\" not in m[3]:
                kind, t, host = m[1].decode(), float(m[2]), m[3].decode()
            else:
                if not raw.strip():
                    continue
                try:
                    ev = parse_line(raw)
                except ValidationError as exc:
                    skipped.insert(len(skipped) - (1 if skipped and skipped[-1].line_no > i else 0),
                                   SkippedLine(i, _event_error(exc)))
                    continue
                kind, t, host, item = ev.kind, ev.t, ev.host, ev
            tmax = t if t > tmax else tmax
            items.append(item)
            times.append(tmax)
            kinds.append(kind)
            hosts.append(host)
            line_nos.append(i)
        return cls(header, items, times, kinds, hosts, line_nos, skipped, p)

    @classmethod
    def from_recording(cls, rec: Recording) -> "RecordingIndex":
        times: list[float] = []
        tmax = float("-inf")
        for ev in rec.events:
            tmax = max(tmax, ev.t)
            times.append(tmax)
        return cls(rec.header, list(rec.events), times, [e.kind for e in rec.events],
                   [e.host for e in rec.events], list(range(2, len(rec.events) + 2)), list(rec.skipped), rec.path)

    @classmethod
    def load(cls, source: "Recording | RecordingIndex | PathLike") -> "RecordingIndex":
        if isinstance(source, RecordingIndex):
            return source
        if isinstance(source, Recording):
            return cls.from_recording(source)
        return cls.open(source)

    # -- access -----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._items)

    @property
    def start(self) -> float:
        return self.times[0] if self.times else self.header.started

    @property
    def end(self) -> float:
        return self.times[-1] if self.times else self.header.started

    def event(self, i: int) -> Event | None:
        """Event ``i`` (parsed once); None if its line is malformed (then listed in ``skipped``)."""
        item = self._items[i]
        if isinstance(item, Event):
            return item
        if i in self._bad:
            return None
        try:
            ev = parse_line(item)
        except ValidationError as exc:
            self._bad.add(i)
            self.skipped.append(SkippedLine(self.line_nos[i], _event_error(exc)))
            return None
        self._items[i] = ev
        return ev

    def position(self, t: float) -> int:
        """Index of the first event at or after ``t``."""
        return bisect_left(self.times, t)

    def position_after(self, t: float) -> int:
        """Index of the first event strictly after ``t``."""
        return bisect_right(self.times, t)

    def events(self, lo: int = 0, hi: int | None = None) -> Iterator[Event]:
        for i in range(lo, len(self._items) if hi is None else hi):
            ev = self.event(i)
            if ev is not None:
                yield ev
