"""Reading a recording: plain or gzip, tolerant of a cut last line and of bad lines in the middle."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
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


_FEED = 4096
"""Compressed bytes fed to the decoder at a time: a damaged byte is then found by re-feeding at most this many."""


@dataclass(frozen=True)
class Damage:
    """Where a damaged gzip stream stopped decoding (a bit flip, a bad sector, an overwritten block)."""

    offset: int
    """Offset in the decoded bytes where the damage is (everything before it was kept)."""
    byte: int
    """Offset in the compressed file of the byte at which the decoder gave up."""
    size: int
    """Size of the compressed file."""
    error: str
    """What zlib said."""
    resumed_at: int | None
    """Compressed offset of the next intact gzip member, where reading went on; None: nothing after."""

    def reason(self, lines_before: int) -> str:
        where = (f"reading resumed at byte {self.resumed_at} (the next intact gzip member)"
                 if self.resumed_at is not None else "nothing after it could be read")
        return (f"gzip data damaged at byte {self.byte} of {self.size} ({self.error}); "
                f"{lines_before} lines read before it; {where}")


def _inflate_member(data: bytes, start: int, out: bytearray) -> tuple[int, bool, tuple[int, str] | None]:
    """Decode one gzip member from ``start`` into ``out``, streaming, so damage keeps what came before it.

    Returns (where the member ended, whether it ended, (byte, zlib's message) if it was damaged).
    """
    d = zlib.decompressobj(wbits=31)
    i, n = start, len(data)
    while i < n:
        chunk = data[i:i + _FEED]
        saved = d.copy()
        try:
            out += d.decompress(chunk)
        except zlib.error:
            d = saved  # re-feed byte by byte: keep every byte decoded before the bad one, and name it
            for j in range(len(chunk)):
                try:
                    out += d.decompress(chunk[j:j + 1])
                except zlib.error as exc:
                    return i + j, False, (i + j, str(exc).removeprefix("Error -3 while decompressing data: "))
                if d.eof:
                    return i + j + 1, True, None
            return i + len(chunk), False, None  # pragma: no cover - zlib raised on the chunk but not on its bytes
        if d.eof:
            return i + len(chunk) - len(d.unused_data), True, None
        i += len(chunk)
    return n, False, None  # cut short: a writer that crashed or is still writing


def _next_member(data: bytes, start: int) -> int | None:
    """The next offset from ``start`` where an intact gzip member holding whole lines begins."""
    pos = data.find(b"\x1f\x8b\x08", start)
    while pos >= 0:
        d = zlib.decompressobj(wbits=31)
        try:
            head = d.decompress(data[pos:pos + _FEED], 16)
        except zlib.error:
            head = b""
        if head[:1] == b"{":  # a member the writer started holds whole JSON lines
            return pos
        pos = data.find(b"\x1f\x8b\x08", pos + 1)
    return None


def gunzip_members(data: bytes) -> Iterator[tuple[int, int, bytearray, Damage | None]]:
    """Decode every gzip member in turn, streaming, so damage never costs what came before it.

    Yields (where the member starts in ``data``, where its decoded bytes end there, its decoded
    text, the damage that stopped it).  A stream cut short (a crashed or running writer) yields
    what was decodable.  At damaged bytes the member's text is cut back to its last whole line,
    the damage is named, and decoding resumes at the next intact member (the writer starts a new
    one every ``writer.MEMBER_BYTES``).  The replay index keeps the first two numbers per member:
    a member decodes alone, so any line is found by decoding its member only.
    """
    total = 0
    pos, n = 0, len(data)
    while pos < n:
        member_start = pos
        out = bytearray()
        pos, ended, bad = _inflate_member(data, pos, out)
        if bad is None:
            total += len(out)
            yield member_start, pos, out, None
            if not ended:
                break
            continue
        del out[out.rfind(b"\n") + 1:]  # a line the damage went through is not a line
        total += len(out)
        resume = _next_member(data, max(member_start + 1, bad[0] - 8))
        yield member_start, bad[0], out, Damage(total, bad[0], n, bad[1], resume)
        if resume is None:
            break
        pos = resume


def _gunzip(data: bytes) -> tuple[bytearray, list[Damage]]:
    """The whole decoded text (see :func:`gunzip_members`) and where damage cut it."""
    out = bytearray()
    damage: list[Damage] = []
    for _, _, part, dmg in gunzip_members(data):
        out += part
        if dmg is not None:
            del out[out.rfind(b"\n") + 1:]  # a line cut before the damaged member is not a line either
            damage.append(dmg)
    return out, damage  # not bytes(out): a copy would double the peak for a big file


def _open_bytes(path: Path) -> tuple[bytes | bytearray, list[Damage]]:
    """The decoded text (a bytearray for gzip, so it is never copied) and where damage cut it."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read: {exc}") from exc
    if data[:2] == b"\x1f\x8b" or (path.name.endswith(".gz") and data[:1] != b"{"):
        return _gunzip(data)
    return data, []


def read_text(path: Path) -> tuple[RecordingHeader, bytes | bytearray, list[SkippedLine]]:
    """The header, the whole decoded text (line 1 included, unsplit) and a SkippedLine per damaged stretch.

    The replay index keeps this one buffer and line offsets into it, not a bytes object per line.
    """
    data, damage = _open_bytes(path)
    if damage and damage[0].offset == 0:
        raise RecordingError(f"{path}: line 1: {damage[0].reason(0)}; the header line is lost, so nothing is readable")
    nl = data.find(b"\n")
    header = _parse_header(path, bytes(data[:nl if nl >= 0 else len(data)]))
    notes = []
    for dmg in damage:
        line_no = data.count(b"\n", 0, dmg.offset) + 1
        notes.append(SkippedLine(line_no, dmg.reason(line_no - 1)))
    return header, data, notes


def _read_lines(path: Path) -> tuple[RecordingHeader, list[bytes], list[SkippedLine]]:
    """The header, every line (line 1 first) and a SkippedLine per damaged stretch (by line number)."""
    header, data, notes = read_text(path)
    return header, bytes(data).split(b"\n") if isinstance(data, bytearray) else data.split(b"\n"), notes


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
        self.header, self._lines, self._damage = _read_lines(self.path)
        self.skipped: list[SkippedLine] = []

    def __iter__(self) -> Iterator[Event]:
        lines = self._lines
        damage = list(self._damage)
        last = len(lines) - 1  # the text after the final newline: b"" unless truncated
        for i in range(1, len(lines)):
            while damage and damage[0].line_no <= i + 1:
                self.skipped.append(damage.pop(0))  # in line order among the other skipped lines
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
        self.skipped.extend(damage)


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
