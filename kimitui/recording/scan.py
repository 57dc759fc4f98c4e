"""One pass over a recording's text that finds what the replay index keeps: no event is parsed unless it must be.

Each line's ``kind``, ``t`` and ``host`` come from its prefix (``dump_event`` always starts
``{"kind":..,"t":..,"host":..``), taken only when they are a strict JSON number and a host without
escapes or control bytes, so a line taken apart here is one the JSON parser also reads; any other
line is parsed (a malformed one is skipped and named, as the plain reader names it).  The text is
read a piece at a time (a gzip member, or 8 MB of a plain file), so the scan's memory is one piece
and the arrays, never the file.
"""

from __future__ import annotations

import re
from array import array

from pydantic import ValidationError

from kimitui.recording.format import RecordingError, RecordingHeader, SkippedLine
from kimitui.recording.index_file import IndexData
from kimitui.recording.reader import TRUNCATED, _event_error, _parse_header, parse_line
from kimitui.recording.source import GzipSource, TextSource

_PREFIX_PATTERN = (
    rb'\{"kind":"([a-z_]+)","t":(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?),"host":"([^"\\\x00-\x1f]*)"')
_PREFIX = re.compile(_PREFIX_PATTERN)
"""``dump_event``'s prefix: a strict JSON number for ``t`` and a host without escapes or control bytes, so
a line this takes apart is one the JSON parser also reads (``1.004.02`` or a stray byte goes the slow way)."""

_LINE_PREFIX = re.compile(b"\n" + _PREFIX_PATTERN)
"""The prefix at a line start, found over a whole piece at C speed (a JSON string holds no raw newline)."""

BULK_KINDS = frozenset({"gpu_sample", "server_stats", "log_line", "request_started", "request_result",
                        "sweep_progress", "client_health", "gpu_procs", "swap_progress"})
"""The high-rate kinds.  Every other line is *rare* (sweeps, levels, profiles, notes, markers, errors: a
few hundred in a 200 MB file) and is kept in the index with its bytes, as are log lines at error or
critical severity: a seek delivers the rare ones from all over the file, and a jump looks for them,
without reading the file (for gzip, without decoding every member)."""

RARE_BYTES = 8 << 20
"""At most this many bytes of rare lines are kept in an index (the rest are read from the recording)."""

_SEVERE = (b'"severity":"error"', b'"severity":"critical"')


class _Builder:
    """The arrays under construction."""

    def __init__(self) -> None:
        self.starts, self.ends, self.times, self.line_nos = array("q"), array("q"), array("d"), array("q")
        self.kind_codes, self.host_codes = array("H"), array("H")
        self.kind_ids: dict[str, int] = {}
        self.host_ids: dict[str, int] = {}
        self.rare, self.rare_ends = array("q"), array("q")
        self.rare_parts: list[bytes] = []
        self.rare_bytes = 0
        self.skipped: list[SkippedLine] = []
        self.tmax = float("-inf")

    def code(self, names: dict[str, int], name: str) -> int:
        c = names.get(name)
        if c is None:
            c = names[name] = len(names)
            if c > 0xFFFF:
                raise RecordingError(f"more than 65536 different kinds or hosts ({name!r})")
        return c

    def add(self, start: int, end: int, line_no: int, kind: str, t: float, host: str) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.tmax = t if t > self.tmax else self.tmax
        self.times.append(self.tmax)
        self.line_nos.append(line_no)
        self.kind_codes.append(self.code(self.kind_ids, kind))
        self.host_codes.append(self.code(self.host_ids, host))

    def mark_rare(self, first: int, buf: bytes | bytearray, base: int) -> None:
        """Keep the rare lines among events ``first``... (their bytes are in ``buf``, which starts at ``base``)."""
        kind_ids = self.kind_ids
        rare_codes = {c for k, c in kind_ids.items() if k not in BULK_KINDS}
        log_code = kind_ids.get("log_line", -1)
        starts, ends, codes = self.starts, self.ends, self.kind_codes
        for i in range(first, len(starts)):
            c = codes[i]
            if c == log_code:
                s, e = starts[i] - base, ends[i] - base
                if buf.find(_SEVERE[0], s, e) < 0 and buf.find(_SEVERE[1], s, e) < 0:
                    continue
            elif c not in rare_codes:
                continue
            self.rare.append(i)
            if self.rare_bytes < RARE_BYTES:
                line = bytes(buf[starts[i] - base:ends[i] - base])
                self.rare_parts.append(line)
                self.rare_bytes += len(line)
            self.rare_ends.append(self.rare_bytes if len(self.rare_parts) == len(self.rare) else -1)


def _fast(b: _Builder, buf: bytes | bytearray, lo: int, last_nl: int, base: int, line_no: int) -> bool:
    """Lines ``buf[lo:last_nl]`` (``buf[lo - 1]`` is a newline), every one written by ``dump_line``: one regex
    pass; False (nothing added) when some line is not."""
    n = buf.count(b"\n", lo, last_nl) + 1
    mark = len(b.starts)
    kind_of: dict[bytes, int] = {}
    host_of: dict[bytes, int] = {}
    starts, times, line_nos = b.starts, b.times, b.line_nos
    kind_codes, host_codes = b.kind_codes, b.host_codes
    tmax = b.tmax
    try:
        for m in _LINE_PREFIX.finditer(buf, lo - 1, last_nl):
            k, t, h = m.groups()
            kc = kind_of.get(k)
            if kc is None:
                kc = kind_of[k] = b.code(b.kind_ids, k.decode())
            hc = host_of.get(h)
            if hc is None:
                hc = host_of[h] = b.code(b.host_ids, h.decode())
            starts.append(m.start() + 1 + base)
            tv = float(t)
            if tv > tmax:
                tmax = tv
            times.append(tmax)
            kind_codes.append(kc)
            host_codes.append(hc)
    except UnicodeDecodeError:  # a stray byte in a host name: find its line the slow way
        pass
    else:
        if len(starts) - mark == n:
            b.tmax = tmax
            ends = b.ends
            ends.extend(starts[mark + 1:])
            for j in range(mark, len(ends)):
                ends[j] -= 1
            ends.append(last_nl + base)
            line_nos.extend(range(line_no, line_no + n))
            return True
    for arr in (starts, times, kind_codes, b.host_codes):  # a blank, hand-written or malformed line somewhere
        del arr[mark:]
    return False


def _slow(b: _Builder, buf: bytes | bytearray, lo: int, last_nl: int, base: int, line_no: int) -> None:
    """Line by line: blank lines, hand-written or reordered JSON, malformed lines."""
    pos = lo
    while pos <= last_nl:
        end = buf.find(b"\n", pos)
        m = _PREFIX.match(buf, pos, end)
        fields = None
        if m is not None:
            try:
                fields = m[1].decode(), float(m[2]), m[3].decode()
            except ValueError:  # UnicodeDecodeError: a stray byte in the host
                fields = None
        if fields is None:
            raw = bytes(buf[pos:end])
            if raw.strip():
                try:
                    ev = parse_line(raw)
                except ValidationError as exc:
                    b.skipped.append(SkippedLine(line_no, _event_error(exc)))
                else:
                    fields = ev.kind, ev.t, ev.host
        if fields is not None:
            b.add(pos + base, end + base, line_no, *fields)
        pos, line_no = end + 1, line_no + 1


def scan(source: TextSource) -> tuple[RecordingHeader, IndexData]:
    """The header and the index of everything ``source`` holds now (``RecordingError`` if the header is unreadable)."""
    b = _Builder()
    header_line: bytes | None = None
    carry: bytes | bytearray = b""
    carry_at = 0
    line_no = 1
    text_size = 0
    for piece in source.pieces():
        text_size = piece.offset + len(piece.data)
        buf, base = (carry + piece.data, carry_at) if carry else (piece.data, piece.offset)
        lo = 0
        if header_line is None:
            nl = buf.find(b"\n")
            if nl >= 0:
                header_line, lo, line_no = bytes(buf[:nl]), nl + 1, 2
        last_nl = buf.rfind(b"\n")
        if header_line is not None and last_nl >= lo:
            first = len(b.starts)
            if lo == 0:  # the fast pass needs a newline before its first line
                nl = buf.find(b"\n")
                _slow(b, buf, 0, nl, base, line_no)
                lo, line_no = nl + 1, line_no + 1
            if lo <= last_nl and not _fast(b, buf, lo, last_nl, base, line_no):
                _slow(b, buf, lo, last_nl, base, line_no)
            b.mark_rare(first, buf, base)
            line_no += buf.count(b"\n", lo, last_nl + 1)
        rest = max(lo, last_nl + 1) if header_line is not None else 0
        carry, carry_at = buf[rest:], base + rest
        if piece.damage is not None:
            if header_line is None or piece.damage.offset == 0:
                raise RecordingError(f"{source.path}: line 1: {piece.damage.reason(0)}; the header line is lost, "
                                     "so nothing is readable")
            b.skipped.append(SkippedLine(line_no, piece.damage.reason(line_no - 1)))
            carry = b""  # a line cut before the damaged member is not a line either (the reader drops it too)
    if header_line is None:  # the header line itself is cut: nothing after it
        header_line = bytes(carry)
        carry = b""
        b.skipped.append(SkippedLine(1, TRUNCATED))
    header = _parse_header(source.path, header_line)
    if carry.strip():  # the text after the final newline: empty unless the last line is cut
        b.skipped.append(SkippedLine(line_no, TRUNCATED))
    b.skipped.sort(key=lambda s: s.line_no)
    blocks = source.blocks if isinstance(source, GzipSource) else array("q")
    kind_names = sorted(b.kind_ids, key=b.kind_ids.__getitem__)
    host_names = sorted(b.host_ids, key=b.host_ids.__getitem__)
    data = IndexData(
        header_line=header_line, text_size=text_size, compressed=isinstance(source, GzipSource),
        kind_names=kind_names, host_names=host_names,
        skipped=[(s.line_no, s.reason) for s in b.skipped], rare_blob=b"".join(b.rare_parts),
        arrays={"starts": b.starts, "ends": b.ends, "times": b.times, "line_nos": b.line_nos,
                "kind_codes": b.kind_codes, "host_codes": b.host_codes, "blocks": blocks,
                "rare": b.rare, "rare_ends": b.rare_ends})
    return header, data
