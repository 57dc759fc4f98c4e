"""Random access to a recording for replay: kinds and times up front, events parsed on demand.

Memory is the decoded text once (one buffer, not an object per line), a few compact arrays
per event (line offsets, running-max times) and a bounded LRU of parsed events: replaying a
file never makes it grow (a parsed ``request_result`` is ~8x its line).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from kimitui.events import Event
from kimitui.recording.format import PathLike, Recording, RecordingHeader, SkippedLine, resolve_path
from kimitui.recording.reader import TRUNCATED, _event_error, parse_line, read_text

_PREFIX_PATTERN = (
    rb'\{"kind":"([a-z_]+)","t":(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?),"host":"([^"\\\x00-\x1f]*)"')
_PREFIX = re.compile(_PREFIX_PATTERN)
"""``dump_event``'s prefix: a strict JSON number for ``t`` and a host without escapes or control bytes, so
a line this takes apart is one the JSON parser also reads (``1.004.02`` or a stray byte goes the slow way)."""

_LINE_PREFIX = re.compile(b"\n" + _PREFIX_PATTERN)
"""The prefix at a line start, found over the whole text at C speed (a JSON string holds no raw newline)."""

CACHE_EVENTS = 64
"""At most this many parsed events are kept (an LRU): replay parses each event once as it plays, and a
jump's look-ups (a level result, then its requests) come back to the few just parsed."""
CACHE_BYTES = 512 << 10
"""...and at most this many bytes of their lines (a parsed event takes ~5-10x its line)."""


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

    Opening reads the decoded text once and keeps it as one buffer; each line's
    ``kind``, ``t`` and ``host`` come from its prefix (``dump_event`` always starts
    ``{"kind":..,"t":..,"host":..``) and only its offsets are kept.  Events are
    parsed on access; the last few are kept in a bounded LRU (``cache_events``
    events, ``cache_bytes`` bytes of their lines), never in place of the bytes, so
    memory stays flat however much is played.  ``times`` is the running maximum of
    ``t`` (play order is file order; a source's late timestamp never makes time
    run backwards), so it is sorted and seekable by bisection.
    """

    def __init__(self, header: RecordingHeader, text: bytes | bytearray | None, starts: array, ends: array,
                 times: array, kinds: list[str], hosts: list[str], line_nos: array, skipped: list[SkippedLine],
                 path: Path | None, *, events: list[Event] | None = None,
                 cache_events: int = CACHE_EVENTS, cache_bytes: int = CACHE_BYTES) -> None:
        self.header = header
        self._text = memoryview(text) if text is not None else None
        self._starts = starts
        self._ends = ends
        self._events = events
        """A recording already in memory (``from_recording``): its events, nothing to parse."""
        self.times = times
        self.kinds = kinds
        self.hosts = hosts
        self.line_nos = line_nos
        self.skipped = skipped
        self.path = path
        self.cache_events = cache_events
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[int, Event] = OrderedDict()
        self._cached_bytes = 0
        self._bad: set[int] = set()
        self.parsed = 0
        """Lines parsed so far (a cache miss each)."""

    # -- building ---------------------------------------------------------------
    @classmethod
    def open(cls, path: PathLike, *, cache_events: int = CACHE_EVENTS,
             cache_bytes: int = CACHE_BYTES) -> "RecordingIndex":
        p = resolve_path(path)
        header, text, skipped = read_text(p)
        hdr_end = text.find(b"\n")
        last_nl = text.rfind(b"\n")
        if hdr_end < 0:  # the header line itself is cut: nothing after it
            skipped.append(SkippedLine(1, TRUNCATED))
            hdr_end = last_nl = len(text)
        elif text[last_nl + 1:].strip():  # the text after the final newline: empty unless the last line is cut
            skipped.append(SkippedLine(text.count(b"\n") + 1, TRUNCATED))
        made = cls._open_fast(header, text, hdr_end, last_nl, skipped, p)
        if made is None:
            made = cls._open_slow(header, text, hdr_end, last_nl, skipped, p)
        made.cache_events, made.cache_bytes = cache_events, cache_bytes
        return made

    @classmethod
    def _open_fast(cls, header: RecordingHeader, text: bytes | bytearray, hdr_end: int, last_nl: int,
                   skipped: list[SkippedLine], p: Path) -> "RecordingIndex | None":
        """Every line written by ``dump_line``: one regex pass, no split; None when some line is not."""
        n_body = text.count(b"\n", hdr_end, last_nl)  # newlines before the last one: the body lines
        starts = array("q")
        times = array("d")
        kinds: list[str] = []
        hosts: list[str] = []
        kind_names: dict[bytes, str] = {}
        host_names: dict[bytes, str] = {}
        add_start, add_time, add_kind, add_host = starts.append, times.append, kinds.append, hosts.append
        tmax = float("-inf")
        try:
            for m in _LINE_PREFIX.finditer(text, hdr_end, last_nl):
                k, t, h = m.groups()
                add_start(m.start() + 1)
                kind = kind_names.get(k)
                if kind is None:
                    kind = kind_names[k] = k.decode()
                host = host_names.get(h)
                if host is None:
                    host = host_names[h] = h.decode()
                tv = float(t)
                if tv > tmax:
                    tmax = tv
                add_time(tmax)
                add_kind(kind)
                add_host(host)
        except UnicodeDecodeError:  # a stray byte in a host name: find its line the slow way
            return None
        if len(starts) != n_body:
            return None  # a blank, hand-written or malformed line somewhere
        ends = array("q", starts[1:])  # a line ends where the next begins, less its newline
        for j in range(len(ends)):
            ends[j] -= 1
        if starts:
            ends.append(last_nl)
        line_nos = array("q", range(2, len(starts) + 2))
        return cls(header, text, starts, ends, times, kinds, hosts, line_nos, skipped, p)

    @classmethod
    def _open_slow(cls, header: RecordingHeader, text: bytes | bytearray, hdr_end: int, last_nl: int,
                   skipped: list[SkippedLine], p: Path) -> "RecordingIndex":
        """Line by line: blank lines, hand-written or reordered JSON, malformed lines."""
        starts, ends, times, line_nos = array("q"), array("q"), array("d"), array("q")
        kinds: list[str] = []
        hosts: list[str] = []
        tmax = float("-inf")
        pos, line_no = hdr_end + 1, 2
        while pos <= last_nl:
            end = text.find(b"\n", pos)
            fields = _prefix_fields(_PREFIX.match(text, pos, end))
            if fields is not None:
                kind, t, host = fields
            else:
                raw = bytes(text[pos:end])
                if not raw.strip():
                    pos, line_no = end + 1, line_no + 1
                    continue
                try:
                    ev = parse_line(raw)
                except ValidationError as exc:
                    skipped.append(SkippedLine(line_no, _event_error(exc)))
                    pos, line_no = end + 1, line_no + 1
                    continue
                kind, t, host = ev.kind, ev.t, ev.host
            tmax = t if t > tmax else tmax
            starts.append(pos)
            ends.append(end)
            times.append(tmax)
            kinds.append(kind)
            hosts.append(host)
            line_nos.append(line_no)
            pos, line_no = end + 1, line_no + 1
        skipped.sort(key=lambda s: s.line_no)
        return cls(header, text, starts, ends, times, kinds, hosts, line_nos, skipped, p)

    @classmethod
    def from_recording(cls, rec: Recording) -> "RecordingIndex":
        """A recording already in memory: its events are the index's (nothing to parse or cache)."""
        times = array("d")
        tmax = float("-inf")
        for ev in rec.events:
            tmax = max(tmax, ev.t)
            times.append(tmax)
        n = len(rec.events)
        return cls(rec.header, None, array("q"), array("q"), times, [e.kind for e in rec.events],
                   [e.host for e in rec.events], array("q", range(2, n + 2)), list(rec.skipped), rec.path,
                   events=list(rec.events))

    @classmethod
    def load(cls, source: "Recording | RecordingIndex | PathLike") -> "RecordingIndex":
        if isinstance(source, RecordingIndex):
            return source
        if isinstance(source, Recording):
            return cls.from_recording(source)
        return cls.open(source)

    # -- access -----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.kinds)

    @property
    def start(self) -> float:
        return self.times[0] if self.times else self.header.started

    @property
    def end(self) -> float:
        return self.times[-1] if self.times else self.header.started

    @property
    def cached(self) -> int:
        """Parsed events held now (never more than ``cache_events``)."""
        return len(self._cache)

    @property
    def text_bytes(self) -> int:
        """Bytes of decoded text held (the file's lines, once)."""
        return self._text.nbytes if self._text is not None else 0

    def raw(self, i: int) -> bytes | None:
        """Line ``i`` as written (for cheap byte tests before parsing); None for a recording built in memory."""
        if self._text is None:
            return None
        return self._text[self._starts[i]:self._ends[i]].tobytes()

    def event(self, i: int) -> Event | None:
        """Event ``i``, parsed from its line (the last few are cached); None if its line is malformed."""
        if self._events is not None:
            return self._events[i]
        cache = self._cache
        ev = cache.get(i)
        if ev is not None:
            cache.move_to_end(i)
            return ev
        if i in self._bad:
            return None
        raw = self.raw(i)
        assert raw is not None
        self.parsed += 1
        try:
            ev = parse_line(raw)
        except ValidationError as exc:
            self._bad.add(i)
            self.skipped.append(SkippedLine(self.line_nos[i], _event_error(exc)))
            return None
        cache[i] = ev
        self._cached_bytes += len(raw)
        while len(cache) > 1 and (len(cache) > self.cache_events or self._cached_bytes > self.cache_bytes):
            j, _ = cache.popitem(last=False)
            self._cached_bytes -= self._ends[j] - self._starts[j]
        return ev

    def verify(self) -> int:
        """Parse every line once, as a full read does (``report``): a malformed line whose prefix looked
        whole joins ``skipped`` under its line number.  Returns how many events parse.  Nothing is kept
        but what ``event`` caches (bounded), so a large file costs time, not memory."""
        if self._events is None:
            for i in range(len(self)):
                if i in self._bad or i in self._cache:
                    continue
                raw = self.raw(i)
                assert raw is not None
                try:
                    parse_line(raw)
                except ValidationError as exc:
                    self._bad.add(i)
                    self.skipped.append(SkippedLine(self.line_nos[i], _event_error(exc)))
            self.skipped.sort(key=lambda s: s.line_no)
        return len(self) - len(self._bad)

    def good(self, i: int) -> bool:
        """Event ``i``'s line is not known to be malformed (``verify`` makes this exact)."""
        return i not in self._bad

    def position(self, t: float) -> int:
        """Index of the first event at or after ``t``."""
        return bisect_left(self.times, t)

    def position_after(self, t: float) -> int:
        """Index of the first event strictly after ``t``."""
        return bisect_right(self.times, t)

    def events(self, lo: int = 0, hi: int | None = None) -> Iterator[Event]:
        for i in range(lo, len(self) if hi is None else hi):
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
