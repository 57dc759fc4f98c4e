"""Random access to a recording for replay: kinds and times up front, events parsed on demand."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import accumulate
from pathlib import Path

from pydantic import ValidationError

from kimitui.events import Event
from kimitui.recording.format import PathLike, Recording, RecordingHeader, SkippedLine, resolve_path
from kimitui.recording.reader import TRUNCATED, _event_error, _read_lines, parse_line

_PREFIX = re.compile(
    rb'\{"kind":"([a-z_]+)","t":(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?),"host":"([^"\\\x00-\x1f]*)"')
"""``dump_event``'s prefix: a strict JSON number for ``t`` and a host without escapes or control bytes, so
a line this takes apart is one the JSON parser also reads (``1.004.02`` or a stray byte goes the slow way)."""


def _prefix_fields(m: re.Match[bytes] | None) -> tuple[str, float, str] | None:
    """(kind, t, host) from a matched prefix; None when the line must be parsed to be judged."""
    if m is None:
        return None
    try:
        return m[1].decode(), float(m[2]), m[3].decode()
    except ValueError:  # UnicodeDecodeError: a stray byte in the host
        return None


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
        header, lines, skipped = _read_lines(p)
        tail = lines.pop()  # the text after the final newline: empty unless the last line is cut
        if tail.strip():
            skipped.append(SkippedLine(len(lines) + 1, TRUNCATED))
        body = lines[1:]
        matches = list(map(_PREFIX.match, body))  # the common case, at C speed
        if all(m is not None for m in matches):
            try:
                names = {k: k.decode() for k in {m[1] for m in matches}}  # type: ignore[index]
                hostnames = {h: h.decode() for h in {m[3] for m in matches}}  # type: ignore[index]
            except UnicodeDecodeError:  # a stray byte in a host name: find its line the slow way
                return cls._open_slow(header, body, matches, skipped, p)
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
            fields = _prefix_fields(m)
            if fields is not None:
                kind, t, host = fields
            else:
                if not raw.strip():
                    continue
                try:
                    ev = parse_line(raw)
                except ValidationError as exc:
                    skipped.append(SkippedLine(i, _event_error(exc)))
                    continue
                kind, t, host, item = ev.kind, ev.t, ev.host, ev
            tmax = t if t > tmax else tmax
            items.append(item)
            times.append(tmax)
            kinds.append(kind)
            hosts.append(host)
            line_nos.append(i)
        skipped.sort(key=lambda s: s.line_no)
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

    def raw(self, i: int) -> bytes | None:
        """Line ``i`` as written, or None once parsed (for cheap byte tests before parsing)."""
        item = self._items[i]
        return item if isinstance(item, bytes) else None

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

    def events_of(self, kinds: Iterable[str]) -> Iterator[Event]:
        """Only events of these kinds, in order; the others are never parsed (a report skips telemetry)."""
        wanted = frozenset(kinds)
        for i, kind in enumerate(self.kinds):
            if kind in wanted:
                ev = self.event(i)
                if ev is not None:
                    yield ev
