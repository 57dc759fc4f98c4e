"""Pieces both host kinds share: splitting byte chunks into lines, exit codes.

Output is split by hand (not ``readline``) so that an overlong line never
raises: it is simply delivered whole when its newline arrives.
"""

from __future__ import annotations

from collections import deque

STDERR_TAIL_LINES = 50
"""How many stderr lines a stream keeps for diagnostics when not merged."""


def decode(data: bytes) -> str:
    """Bytes from a process as text; bad UTF-8 is replaced, never fatal."""
    return data.decode("utf-8", errors="replace")


def normalise_exit(returncode: int | None) -> int | None:
    """A process exit code; ``None`` when killed by a signal (negative code)."""
    if returncode is None or returncode < 0:
        return None
    return returncode


class LineSplitter:
    """Feed byte chunks, take complete text lines (without ``\\n`` or ``\\r\\n``)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[str]:
        self._buf += chunk
        if b"\n" not in chunk:
            return []
        *complete, rest = bytes(self._buf).split(b"\n")
        self._buf = bytearray(rest)
        return [decode(line.removesuffix(b"\r")) for line in complete]

    def flush(self) -> list[str]:
        """The unterminated last line, if any (at end of output)."""
        if not self._buf:
            return []
        line, self._buf = bytes(self._buf), bytearray()
        return [decode(line.removesuffix(b"\r"))]


class StderrTail:
    """The last lines a stream wrote to stderr, for error messages."""

    def __init__(self, maxlen: int = STDERR_TAIL_LINES) -> None:
        self.lines: deque[str] = deque(maxlen=maxlen)
        self._split = LineSplitter()

    def feed(self, chunk: bytes) -> None:
        self.lines.extend(self._split.feed(chunk))

    def close(self) -> None:
        self.lines.extend(self._split.flush())

    def text(self) -> str:
        return "\n".join(self.lines)
