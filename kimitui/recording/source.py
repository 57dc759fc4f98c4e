"""A recording's decoded text, read piece by piece: once in order (to index it) or at any offset (to replay it).

Plain files are read with ``pread`` at the offsets asked for.  Gzip files are read by *block*: a gzip
member (the writer starts one every ``writer.MEMBER_BYTES`` of text, at a line boundary) decodes on
its own, so a line is found by decoding only its member, never the members before it.  The last two
decoded blocks are kept (a replay plays through one, a seek reads a window of a few), so memory is a
couple of blocks, not the file.
"""

from __future__ import annotations

import os
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

KEEP_BLOCKS = 2
"""Decoded gzip blocks kept: the one being played and the one before it (a line never spans more)."""


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
        self._kept: dict[int, bytes] = {}
        self.decoded = 0
        """Blocks decoded for random access so far (each costs one member's inflate)."""

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

    def _block(self, k: int) -> bytes:
        got = self._kept.get(k)
        if got is not None:
            return got
        u_off, u_len, c_off, c_len = self.blocks[4 * k:4 * k + 4]
        d = zlib.decompressobj(wbits=31)
        try:
            out = d.decompress(self._pread(c_len, c_off), u_len)
        except zlib.error as exc:
            raise RecordingError(f"{self.path}: gzip data at byte {c_off} no longer decodes ({exc}); "
                                 "the file changed since it was indexed") from exc
        if len(out) != u_len:
            raise RecordingError(f"{self.path}: gzip member at byte {c_off} decodes to {len(out)} bytes, "
                                 f"not {u_len}; the file changed since it was indexed")
        self.decoded += 1
        if len(self._kept) >= KEEP_BLOCKS:
            self._kept.pop(next(iter(self._kept)))
        self._kept[k] = out
        return out

    def read(self, lo: int, hi: int) -> bytes:
        k = bisect_right(self._starts, lo) - 1
        parts: list[bytes] = []
        while lo < hi:
            if k < 0 or k >= len(self._starts):
                raise RecordingError(f"{self.path}: text offset {lo} is in no gzip member (stale index?)")
            start = self._starts[k]
            block = self._block(k)
            part = block[lo - start:hi - start]
            if not part:
                raise RecordingError(f"{self.path}: text offset {lo} is past its gzip member (stale index?)")
            parts.append(part)
            lo += len(part)
            k += 1
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
