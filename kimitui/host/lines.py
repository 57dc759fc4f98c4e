"""Pieces both host kinds share: splitting byte chunks into lines, exit codes.

Output is split by hand (not ``readline``) so that an overlong line never
raises; it is delivered when its newline arrives, cut at ``MAX_LINE_BYTES`` so
an endless line (a process printing without newlines) cannot grow memory.  The
log parser flags lines over its own, smaller cap as truncated.
"""

from __future__ import annotations

import re
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


_REDRAW = re.compile(rb"\r+(?=[^\x00-\x1a\x1c-\x1f])")
"""A tqdm redraw: ``\\r`` followed by the bar's next state, text (or its colour), not ``\\n`` or another
control byte (a ``\\r\\n`` line end, or one a follower marked as whole: ``\\r\\x1e\\n``)."""


class LineSplitter:
    """Feed byte chunks, take complete text lines (without ``\\n`` or ``\\r\\n``).

    A tqdm redraw (``\\r`` and the bar's next state, no newline) also ends a line, so a progress bar is
    read as it moves (a CUDA-graph capture's 1/52 ... 52/52), not as one line when it ends (issue 32)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._held_cr = 0
        """``\\r`` that ended the last chunk: the next byte says whether they end a line (``\\n``) or a redraw."""

    def feed(self, chunk: bytes) -> list[str]:
        if self._held_cr:
            chunk, self._held_cr = b"\r" * self._held_cr + chunk, 0
        if b"\r" in chunk:
            chunk = self._redraws_as_lines(chunk)
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

    def _redraws_as_lines(self, chunk: bytes) -> bytes:
        """Each redraw as a line end; ``\\r`` at a line's start (tqdm's first draw) dropped."""
        body = chunk.rstrip(b"\r")
        self._held_cr = len(chunk) - len(body)

        def cut(m: re.Match[bytes]) -> bytes:
            at = m.start()
            has_text = body[at - 1:at] != b"\n" if at else bool(self._buf)
            return b"\n" if has_text else b""

        return _REDRAW.sub(cut, body)

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
        if self._held_cr:
            self._add(b"\r" * self._held_cr)
            self._held_cr = 0
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
