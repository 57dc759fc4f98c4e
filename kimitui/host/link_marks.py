"""Connections an SSH forward cut because its link was lost, so the load process can call them ``link_lost``.

The load process (:mod:`kimitui.loadgen.worker`) is another process: all it sees of a lost link
is its socket to the forward on 127.0.0.1 closing, the same as a server hanging up mid-response
(``reset``).  The forward knows better, so before it closes such a socket it writes one line,
``<forward port> <client port> <unix time> <why>``, to a small file in kimitui's state folder;
the client, when its loopback connection closes under a request, looks its own two ports up.
A mark older than the connection it names belongs to an earlier connection on the same ports.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from kimitui.paths import state_dir
from kimitui.private_files import FILE_MODE, atomic_write, private_dir

KEEP_S = 600.0
"""How long a mark is kept (a request that outlives its link learns it within seconds)."""
_PRUNE_AT = 64 * 1024
"""File size at which marks older than KEEP_S are dropped."""
_cache: tuple[tuple[str, int, int], dict[tuple[int, int], tuple[float, str]]] | None = None


def marks_file() -> Path:
    return state_dir() / "forwards-lost"


def mark(forward_port: int, client_port: int, why: str) -> None:
    """Say that the forward on ``forward_port`` cut the connection from ``client_port`` (before closing it)."""
    path = marks_file()
    line = f"{forward_port} {client_port} {time.time():.3f} {' '.join(why.split())[:300]}\n".encode()
    with contextlib.suppress(OSError):  # a mark is a better word for a failure, never a new failure
        private_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
        try:
            os.write(fd, line)  # one write of one short line: appends from several processes do not interleave
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > _PRUNE_AT:
            _prune(path)


def _prune(path: Path) -> None:
    keep = [ln for ln in path.read_bytes().splitlines(keepends=True)
            if (_parse(ln) or (0, 0, 0.0, ""))[2] > time.time() - KEEP_S]
    atomic_write(path, b"".join(keep))


def _parse(line: bytes) -> tuple[int, int, float, str] | None:
    parts = line.decode("utf-8", "replace").rstrip("\n").split(" ", 3)
    try:
        return int(parts[0]), int(parts[1]), float(parts[2]), parts[3] if len(parts) > 3 else ""
    except (ValueError, IndexError):
        return None


def lookup(forward_port: int, client_port: int, since: float) -> str | None:
    """Why the forward on ``forward_port`` cut ``client_port``'s connection, if it did at ``since`` (unix time) or later."""
    global _cache
    path = marks_file()
    try:
        st = path.stat()
    except OSError:
        return None
    key = (str(path), st.st_mtime_ns, st.st_size)
    if _cache is None or _cache[0] != key:  # a storm of cut connections reads the file once
        marks: dict[tuple[int, int], tuple[float, str]] = {}
        with contextlib.suppress(OSError):
            for ln in path.read_bytes().splitlines():
                parsed = _parse(ln)
                if parsed is not None:
                    marks[(parsed[0], parsed[1])] = (parsed[2], parsed[3])
        _cache = (key, marks)
    found = _cache[1].get((forward_port, client_port))
    if found is None or found[0] < since:  # an earlier connection's mark on the same two ports
        return None
    return found[1] or "the SSH link was lost"
