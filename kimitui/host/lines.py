"""Pieces both host kinds share: splitting byte chunks into lines, exit codes.

Output is split by hand (not ``readline``) so that an overlong line never
raises; it is delivered when its newline arrives, cut at ``MAX_LINE_BYTES`` so
an endless line (a process printing without newlines) cannot grow memory.  The
log parser flags lines over its own, smaller cap as truncated.
"""

from __future__ import annotations

from collections import deque

STDERR_TAIL_LINES = 50
"""How many stderr lines a stream keeps for diagnostics when not merged."""
MAX_LINE_BYTES = 1 << 20
"""The most of one line a stream keeps (1 MiB); the rest of that line is dropped."""


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
        *complete, rest = chunk.split(b"\n")
        out: list[str] = []
        for piece in complete:
            if self._buf:
                self._add(piece)
                piece, self._buf = bytes(self._buf), bytearray()
            elif len(piece) > MAX_LINE_BYTES:
                piece = piece[:MAX_LINE_BYTES]
            out.append(decode(piece.removesuffix(b"\r")))
        self._add(rest)
        return out

    @property
    def pending_bytes(self) -> int:
        """Bytes of the line still waiting for its newline (never more than ``MAX_LINE_BYTES``)."""
        return len(self._buf)

    def _add(self, piece: bytes) -> None:
        """Append to the pending line, up to the cap (what is past it is dropped)."""
        room = MAX_LINE_BYTES - len(self._buf)
        if room > 0 and piece:
            self._buf += piece[:room]

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
