"""Random access to a recording for replay: kinds and times up front, events parsed on demand.

Opening reads the index beside the recording (``NAME.idx``, see :mod:`kimitui.recording.index_file`)
or, when there is none or it is stale or damaged, scans the recording once
(:mod:`kimitui.recording.scan`) and writes one.  Memory is a few compact arrays per event (offsets,
running-max times, kinds, hosts), the rare lines' bytes, a bounded LRU of parsed events and, for
gzip, the last two decoded members: never the file.  Lines are read from the file when played.
"""

from __future__ import annotations

import logging
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from kimitui.events import Event
from kimitui.recording import index_file
from kimitui.recording.format import PathLike, Recording, RecordingError, RecordingHeader, SkippedLine, resolve_path
from kimitui.recording.index_file import IndexData, IndexFileError, StaleIndex
from kimitui.recording.reader import _event_error, _parse_header, parse_line
from kimitui.recording.scan import scan
from kimitui.recording.source import GzipSource, TextSource, open_source

log = logging.getLogger(__name__)

CACHE_EVENTS = 64
"""At most this many parsed events are kept (an LRU): replay parses each event once as it plays, and a
jump's look-ups (a level result, then its requests) come back to the few just parsed."""
CACHE_BYTES = 512 << 10
"""...and at most this many bytes of their lines (a parsed event takes ~5-10x its line)."""

class RecordingIndex:
    """Random access to a recording without parsing every event up front.

    ``kinds``, ``hosts``, ``times`` and ``line_nos`` are known for every event from the index;
    events are parsed from their lines on access and the last few kept in a bounded LRU
    (``cache_events`` events, ``cache_bytes`` bytes of their lines), so memory stays flat however
    much is played.  ``times`` is the running maximum of ``t`` (play order is file order; a
    source's late timestamp never makes time run backwards), so it is sorted and seekable by
    bisection.  ``rare`` lists the positions of the rare lines (see ``scan.BULK_KINDS``), whose
    bytes the index holds.
    """

    def __init__(self, header: RecordingHeader, source: TextSource | None, starts: array, ends: array,
                 times: array, kinds: list[str], hosts: list[str], line_nos: array, skipped: list[SkippedLine],
                 path: Path | None, *, events: list[Event] | None = None, rare: array | None = None,
                 rare_lines: dict[int, bytes] | None = None, text_size: int = 0,
                 cache_events: int = CACHE_EVENTS, cache_bytes: int = CACHE_BYTES) -> None:
        self.header = header
        self._source = source
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
        self.rare = rare if rare is not None else array("q")
        """Positions of the rare events (every kind but the high-rate ones, and severe log lines), in order."""
        self._rare_lines = rare_lines or {}
        self.text_size = text_size
        self.cache_events = cache_events
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[int, Event] = OrderedDict()
        self._cached_bytes = 0
        self._bad: set[int] = set()
        self.parsed = 0
        """Lines parsed so far (a cache miss each)."""
        self.index_status = "in memory"
        """How the index was had: read from its file, or built (and written, or kept in memory) and why."""

    # -- building ---------------------------------------------------------------
    @classmethod
    def open(cls, path: PathLike, *, cache_events: int = CACHE_EVENTS, cache_bytes: int = CACHE_BYTES,
             write_index: bool = True) -> "RecordingIndex":
        """The index of the recording at ``path``: read from ``NAME.idx`` when it is the recording's own,
        else built by a scan and written there (``write_index``); a folder that cannot be written is fine."""
        p = resolve_path(path)
        source = open_source(p)
        try:
            made = cls._open(p, source, write_index)
        except BaseException:
            source.close()
            raise
        made.cache_events, made.cache_bytes = cache_events, cache_bytes
        return made

    @classmethod
    def _open(cls, p: Path, source: TextSource, write_index: bool) -> "RecordingIndex":
        try:
            ident = index_file.identity(source.fd, source.size)
        except OSError as exc:
            raise RecordingError(f"{p}: cannot read: {exc}") from exc
        ipath = index_file.index_path(p)
        why = "no index yet"
        try:
            data = index_file.load(ipath, ident)
            made = cls._from_data(_parse_header(p, data.header_line), data, source, p)
            made.index_status = f"read from {ipath.name}"
            return made
        except FileNotFoundError:
            pass
        except StaleIndex as exc:
            why = f"{ipath.name}: {exc}"
            log.info("replay index %s; rebuilding it", why)
        except IndexFileError as exc:
            why = f"{ipath}: {exc}"
            log.warning("replay index %s; rebuilding it", why)
        except OSError as exc:
            why = f"{ipath}: cannot read ({exc})"
            log.warning("replay index %s; rebuilding it", why)
        header, data = scan(source)
        made = cls._from_data(header, data, source, p)
        made.index_status = f"built ({why})"
        if write_index:
            try:
                index_file.save(ipath, data, ident)
            except OSError as exc:
                made.index_status += f"; kept in memory: cannot write {ipath} ({exc.strerror or exc})"
                log.info("replay index %s", made.index_status)
            else:
                made.index_status += f"; written to {ipath.name}"
        return made

    @classmethod
    def _from_data(cls, header: RecordingHeader, data: IndexData, source: TextSource, p: Path) -> "RecordingIndex":
        a = data.arrays
        n = len(a["starts"])
        if (any(len(a[k]) != n for k in ("ends", "times", "line_nos", "kind_codes", "host_codes"))
                or len(a["rare_ends"]) != len(a["rare"]) or len(a["blocks"]) % 4
                or data.compressed != isinstance(source, GzipSource)
                or (n and (max(a["kind_codes"]) >= len(data.kind_names) or max(a["host_codes"]) >= len(data.host_names)))
                or (n and max(a["ends"]) > data.text_size)):
            raise IndexFileError("damaged (its arrays disagree)")
        if isinstance(source, GzipSource) and not source.blocks:
            source.blocks = a["blocks"]
            source._starts = list(a["blocks"][0::4])
        kinds = list(map(data.kind_names.__getitem__, a["kind_codes"]))
        hosts = list(map(data.host_names.__getitem__, a["host_codes"]))
        rare_lines: dict[int, bytes] = {}
        blob, prev = data.rare_blob, 0
        for i, end in zip(a["rare"], a["rare_ends"]):
            if end < 0:
                break
            rare_lines[i] = blob[prev:end]
            prev = end
        skipped = [SkippedLine(line_no, reason) for line_no, reason in data.skipped]
        return cls(header, source, a["starts"], a["ends"], a["times"], kinds, hosts, a["line_nos"], skipped, p,
                   rare=a["rare"], rare_lines=rare_lines, text_size=data.text_size)

    @classmethod
    def write_index(cls, path: PathLike) -> str:
        """Scan the recording at ``path`` and write its index beside it (the writer does, on close).

        Returns what was done; an error is said, never raised (the recording itself is whole)."""
        try:
            return cls.open(path, cache_events=1).close_status()
        except (RecordingError, OSError) as exc:
            return f"not indexed: {exc}"

    def close_status(self) -> str:
        status = self.index_status
        self.close()
        return status

    def close(self) -> None:
        """Let go of the file (an index from memory has none); reading after this raises."""
        if self._source is not None:
            self._source.close()

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
    def on_disk(self) -> bool:
        """Read from a file (``rare`` then lists every rare event); False for a recording built in memory."""
        return self._source is not None

    @property
    def cached(self) -> int:
        """Parsed events held now (never more than ``cache_events``)."""
        return len(self._cache)

    @property
    def text_bytes(self) -> int:
        """Bytes of decoded text the recording holds (read from the file as played, not held)."""
        return self.text_size

    def raw(self, i: int) -> bytes | None:
        """Line ``i`` as written (for cheap byte tests before parsing); None for a recording built in memory."""
        if self._source is None:
            return None
        line = self._rare_lines.get(i)
        if line is not None:
            return line
        return self._source.read(self._starts[i], self._ends[i])

    def parse(self, i: int) -> Event | None:
        """Event ``i`` parsed from its line, past the cache (a seek's thousands would only churn it);
        None if its line is malformed."""
        if self._events is not None:
            return self._events[i]
        ev = self._cache.get(i)
        if ev is not None or i in self._bad:
            return ev
        raw = self.raw(i)
        assert raw is not None
        self.parsed += 1
        try:
            return parse_line(raw)
        except ValidationError as exc:
            self._bad.add(i)
            self.skipped.append(SkippedLine(self.line_nos[i], _event_error(exc)))
            return None

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
