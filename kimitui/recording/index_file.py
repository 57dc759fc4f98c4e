"""The replay index on disk: ``.NAME.idx`` beside recording ``NAME`` (see ``docs/recording-format.md``).

It holds what opening a recording would otherwise scan the whole file for: each event's offsets in
the decoded text, its running-max time, kind and host, the lines skipped and why, the gzip members'
places, and the few rare lines a seek always delivers.  It is a cache: it names the recording it
was made from (size, mtime, inode and a fingerprint of its bytes), and a reader that finds it
missing, stale, from another version or damaged builds a new one from the recording.  Written
atomically, 0600, like every other file kimitui keeps.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kimitui.private_files import atomic_write

SUFFIX = ".idx"
MAGIC = b"kimitui-recording-index\n"
VERSION = 1
"""Bumped whenever what a scan records changes: an index of another version is rebuilt."""

WHOLE_BYTES = 4 << 20
"""A recording up to this size is fingerprinted whole; a bigger one by its head, tail and 32 samples."""
_EDGE = 64 << 10
_SAMPLES = 32
_SAMPLE = 4 << 10

ARRAYS = ("starts", "ends", "times", "line_nos", "kind_codes", "host_codes", "blocks", "rare", "rare_ends")
"""The arrays an index holds, in file order."""


class IndexFileError(Exception):
    """An index that cannot be used (damaged, another version, another recording); the message says why."""


class StaleIndex(IndexFileError):
    """An index of the recording as it was (appended to, cut, replaced since): the ordinary reason to rebuild."""


def index_path(recording: Path) -> Path:
    """``.NAME.idx`` beside ``NAME`` (``x.jsonl.gz`` -> ``.x.jsonl.gz.idx``): hidden, a cache and not a document,
    so a listing or a ``NAME*`` pattern finds the recordings only."""
    return recording.with_name(f".{recording.name}{SUFFIX}")


@dataclass(frozen=True)
class Identity:
    """What names one state of a recording file: an append, a truncation or a replacement changes it."""

    size: int
    mtime_ns: int
    inode: int
    fingerprint: str


def identity(fd: int, size: int) -> Identity:
    """The identity of the open recording ``fd``, read up to ``size`` bytes (what the reader will index)."""
    st = os.fstat(fd)
    h = hashlib.blake2b(digest_size=16)
    h.update(size.to_bytes(8, "little"))
    if size <= WHOLE_BYTES:
        h.update(os.pread(fd, size, 0))
    else:
        h.update(os.pread(fd, _EDGE, 0))
        step = (size - 2 * _EDGE) // (_SAMPLES + 1)
        for k in range(1, _SAMPLES + 1):
            h.update(os.pread(fd, _SAMPLE, _EDGE + k * step))
        h.update(os.pread(fd, _EDGE, size - _EDGE))
    return Identity(size, st.st_mtime_ns, st.st_ino, h.hexdigest())


@dataclass
class IndexData:
    """An index's contents (what ``RecordingIndex`` is built from)."""

    header_line: bytes
    text_size: int
    """Bytes of decoded text indexed."""
    compressed: bool
    kind_names: list[str]
    host_names: list[str]
    skipped: list[tuple[int, str]]
    rare_blob: bytes
    """The rare lines' bytes, back to back (``rare_ends`` marks where each ends)."""
    arrays: dict[str, array] = field(default_factory=dict)


def dump(data: IndexData, ident: Identity) -> bytes:
    payload = b"".join(data.arrays[name].tobytes() for name in ARRAYS) + data.rare_blob
    packed = zlib.compress(payload, 1)
    meta: dict[str, Any] = {
        "version": VERSION,
        "byteorder": sys.byteorder,
        "identity": ident.__dict__,
        "header_line": data.header_line.decode("utf-8", "surrogateescape"),
        "text_size": data.text_size,
        "compressed": data.compressed,
        "kind_names": data.kind_names,
        "host_names": data.host_names,
        "skipped": data.skipped,
        "arrays": [[name, data.arrays[name].typecode, len(data.arrays[name])] for name in ARRAYS],
        "rare_blob": len(data.rare_blob),
        "payload": len(payload),
        "crc32": zlib.crc32(packed),
    }
    head = json.dumps(meta, separators=(",", ":")).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + packed


def save(path: Path, data: IndexData, ident: Identity) -> None:
    """Atomically, 0600 (``OSError`` when the folder is read-only: the caller works from memory)."""
    atomic_write(path, dump(data, ident))


def load(path: Path, ident: Identity) -> IndexData:
    """The index at ``path`` if it was made from the recording ``ident`` names; ``IndexFileError`` says why not.

    ``FileNotFoundError`` when there is none."""
    raw = path.read_bytes()
    if not raw.startswith(MAGIC) or len(raw) < len(MAGIC) + 4:
        raise IndexFileError("not a kimitui recording index")
    (n,) = struct.unpack_from("<I", raw, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        meta = json.loads(raw[start:start + n])
    except ValueError as exc:
        raise IndexFileError(f"damaged header ({exc})") from exc
    if not isinstance(meta, dict):
        raise IndexFileError("damaged header")
    if meta.get("version") != VERSION or meta.get("byteorder") != sys.byteorder:
        raise StaleIndex(f"index version {meta.get('version')} ({meta.get('byteorder')}), "
                         f"this kimitui writes {VERSION} ({sys.byteorder})")
    if meta.get("identity") != ident.__dict__:
        raise StaleIndex("stale: the recording changed since it was indexed")
    packed = raw[start + n:]
    try:
        if zlib.crc32(packed) != meta["crc32"]:
            raise IndexFileError("damaged (checksum mismatch)")
        payload = zlib.decompress(packed)
        if len(payload) != meta["payload"]:
            raise IndexFileError("damaged (payload size)")
        arrays: dict[str, array] = {}
        pos = 0
        view = memoryview(payload)
        for name, code, count in meta["arrays"]:
            arr = array(code)
            end = pos + count * arr.itemsize
            arr.frombytes(view[pos:end])
            arrays[name] = arr
            pos = end
        if set(arrays) != set(ARRAYS) or pos + meta["rare_blob"] != len(payload):
            raise IndexFileError("damaged (array sizes)")
        return IndexData(
            header_line=meta["header_line"].encode("utf-8", "surrogateescape"),
            text_size=int(meta["text_size"]), compressed=bool(meta["compressed"]),
            kind_names=list(meta["kind_names"]), host_names=list(meta["host_names"]),
            skipped=[(int(a), str(b)) for a, b in meta["skipped"]],
            rare_blob=bytes(view[pos:]), arrays=arrays)
    except IndexFileError:
        raise
    except (KeyError, TypeError, ValueError, zlib.error) as exc:
        raise IndexFileError(f"damaged ({type(exc).__name__}: {exc})") from exc
