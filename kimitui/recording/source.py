"""A recording's decoded text, read piece by piece: once in order (to index it) or at any offset (to replay it).

Plain files are read with ``pread`` at the offsets asked for.  Gzip files are read by *member*: a gzip
member (the writer starts one every ``writer.MEMBER_BYTES`` of text, at a line boundary) decodes on
its own, so a line is found by decoding only its member, never the members before it.  Decoding goes
on from where the last read stopped (a replay, a seek's window read in order), 64 KB at a time, and
keeps only the text not yet read: memory is one decoder and a window, not a member, not the file.
"""

from __future__ import annotations

import os
import threading
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kimitui.recording.format import RecordingError
from kimitui.recording.reader import Damage, gunzip_members

READ_BYTES = 8 << 20
"""Plain text read at a time while indexing (the scan's memory is one of these, not the file)."""

READ_AHEAD = 256 << 10
"""Plain text read at a time while playing: a replay or a seek reads on in order, one ``pread`` per this."""

STEP = 64 << 10
"""Gzip text decoded at a time while playing: only the lines still to be read are kept, never a whole member."""
FEED = 16 << 10
"""Compressed bytes read at a time."""
KEEP_BEHIND = 256 << 10
"""Text kept before the offset asked for when a read goes back within a member."""


@dataclass(frozen=True)
class Piece:
    """A stretch of decoded text, in order: where it starts in the text, its bytes, and the damage that ended it."""

    offset: int
    data: bytes | bytearray
    damage: Damage | None = None


def is_gzip(path: Path, head: bytes) -> bool:
    """The reader's rule: gzip magic, or a ``.gz`` name whose first byte is not a JSON object's."""
    return head[:2] == b"\x1f\x8b" or (path.name.endswith(".gz") and head[:1] != b"{")


class TextSource:
    """Random access to the decoded text of one recording, up to ``size`` bytes of the file as opened."""

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self.fd = fd
        self.size = size
        """File bytes this source reads (the file as it was opened: a running writer may append more)."""
        self._lock = threading.Lock()
        """Reads share a read-ahead window (and for gzip a decoder): one at a time, whatever thread asks."""

    def pieces(self) -> Iterator[Piece]:  # pragma: no cover - abstract
        raise NotImplementedError

    def read(self, lo: int, hi: int) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()

    def _pread(self, n: int, offset: int) -> bytes:
        try:
            return os.pread(self.fd, n, offset)
        except OSError as exc:
            raise RecordingError(f"{self.path}: cannot read: {exc}") from exc


class PlainSource(TextSource):
    """The file is the text; read ahead by ``READ_AHEAD`` (lines are read in order far more than not)."""

    compressed = False

    def __init__(self, path: Path, fd: int, size: int) -> None:
        super().__init__(path, fd, size)
        self._buf = b""
        self._at = 0

    def pieces(self) -> Iterator[Piece]:
        pos = 0
        while pos < self.size:
            data = self._pread(min(READ_BYTES, self.size - pos), pos)
            if not data:
                break
            yield Piece(pos, data)
            pos += len(data)

    def read(self, lo: int, hi: int) -> bytes:
        with self._lock:
            return self._read(lo, hi)

    def _read(self, lo: int, hi: int) -> bytes:
        at = self._at
        if at <= lo and hi <= at + len(self._buf):
            return self._buf[lo - at:hi - at]
        data = self._pread(max(hi - lo, min(READ_AHEAD, self.size - lo)), lo)
        if hi - lo < READ_AHEAD:
            self._buf, self._at = data, lo
            data = data[:hi - lo]
        if len(data) != hi - lo:
            raise RecordingError(f"{self.path}: shorter than when it was indexed (truncated while open?)")
        return data


class GzipSource(TextSource):
    """Decoded by gzip member; ``blocks`` maps text offsets to the compressed bytes that hold them."""

    compressed = True

    def __init__(self, path: Path, fd: int, size: int, blocks: array | None = None) -> None:
        super().__init__(path, fd, size)
        self.blocks = blocks if blocks is not None else array("q")
        """Flat (text offset, text length, file offset, file length) per decodable stretch, in text order."""
        self._starts: list[int] = list(self.blocks[0::4])
        self._k = -1
        """The member being decoded, and its decoder, the compressed bytes fed to it, the text window."""
        self._d = zlib.decompressobj(wbits=31)
        self._fed = 0
        self._buf = b""
        self._at = 0
        self._keep_from = 0
        self.decoded = 0
        """Members decoded from their start for random access so far."""

    def pieces(self) -> Iterator[Piece]:
        """Every member in order (a damaged one cut at its last whole line); records the block table."""
        data = self._pread(self.size, 0)
        blocks = array("q")
        pos = 0
        for c_start, c_end, out, damage in gunzip_members(data):
            if out:
                blocks.extend((pos, len(out), c_start, c_end - c_start))
            yield Piece(pos, out, damage)
            pos += len(out)
        self.blocks = blocks
        self._starts = list(blocks[0::4])

    def _restart(self, k: int, keep_from: int) -> None:
        """Decode member ``k`` from its start (a member decodes alone), keeping text from ``keep_from`` on."""
        u_off, _, c_off, _ = self.blocks[4 * k:4 * k + 4]
        self._k, self._d, self._fed = k, zlib.decompressobj(wbits=31), 0
        self._buf, self._at, self._keep_from = b"", u_off, keep_from
        self.decoded += 1

    def _more(self) -> None:
        """Decode the next ``STEP`` bytes of the current member into the window."""
        k = self._k
        u_off, u_len, c_off, c_len = self.blocks[4 * k:4 * k + 4]
        d = self._d
        try:
            if d.unconsumed_tail:
                out = d.decompress(d.unconsumed_tail, STEP)
            else:
                chunk = self._pread(min(FEED, c_len - self._fed), c_off + self._fed)
                if not chunk:
                    raise RecordingError(f"{self.path}: gzip member at byte {c_off} ends before its "
                                         f"{u_len} bytes of text; the file changed since it was indexed")
                self._fed += len(chunk)
                out = d.decompress(chunk, STEP)
        except zlib.error as exc:
            raise RecordingError(f"{self.path}: gzip data at byte {c_off + self._fed} no longer decodes ({exc}); "
                                 "the file changed since it was indexed") from exc
        drop = max(0, min(self._keep_from, self._at + len(self._buf)) - self._at)
        self._buf = self._buf[drop:] + out
        self._at += drop

    def read(self, lo: int, hi: int) -> bytes:
        with self._lock:
            return self._read(lo, hi)

    def _read(self, lo: int, hi: int) -> bytes:
        """Text ``[lo, hi)``.  Decoding goes on from where the last read stopped (a replay, a seek's window);
        an earlier offset decodes its member again, keeping ``KEEP_BEHIND`` bytes so a walk backwards
        restarts once per that many, not once per line."""
        parts: list[bytes] = []
        while lo < hi:
            k = bisect_right(self._starts, lo) - 1
            if k < 0 or lo >= self._starts[k] + self.blocks[4 * k + 1]:
                raise RecordingError(f"{self.path}: text offset {lo} is in no gzip member (stale index?)")
            end = min(hi, self._starts[k] + self.blocks[4 * k + 1])
            if k != self._k or lo < self._at:
                self._restart(k, max(self._starts[k], lo - KEEP_BEHIND) if k == self._k else lo)
            else:
                self._keep_from = lo
            while self._at + len(self._buf) < end:
                try:
                    self._more()
                except RecordingError:
                    self._k = -1  # decode it again next time
                    raise
            parts.append(self._buf[lo - self._at:end - self._at])
            lo = end
        return parts[0] if len(parts) == 1 else b"".join(parts)


def open_source(path: Path) -> TextSource:
    """The recording at ``path`` opened for reading (the file's size fixed now); the caller closes it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read: {exc}") from exc
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, 2, 0)
    except OSError as exc:
        os.close(fd)
        raise RecordingError(f"{path}: cannot read: {exc}") from exc
    return GzipSource(path, fd, size) if is_gzip(path, head) else PlainSource(path, fd, size)
