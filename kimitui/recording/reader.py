"""Reading a recording: plain or gzip, tolerant of a cut last line and of bad lines in the middle."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from kimitui.events import Event, SweepSpec, SweepStarted, parse_event
from kimitui.recording.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    PathLike,
    Recording,
    RecordingError,
    RecordingHeader,
    SkippedLine,
    resolve_path,
)


TRUNCATED = "truncated last line (no newline): the writer crashed or is still writing"


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
                    self.skipped.append(SkippedLine(i + 1, TRUNCATED))
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
