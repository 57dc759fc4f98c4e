"""How late the log panel is: from a line being published to a row of the panel being painted with it.

"Painted" is measured where Textual paints: the ``Log``'s ``render_line``, which the compositor calls
only for rows it repaints.  Reading ``Log.lines`` instead would miss a panel that holds the newest line
but never repaints it (Textual's ``Log`` at ``max_lines`` refreshes rows past its end after pruning).
A line counts as shown once it, or a newer one, is painted: at 500 lines/s most lines scroll past
between two frames.  Lines carry an increasing number (``seq_of``) so a painted row names them.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from textual.strip import Strip
from textual.widgets import Log

from kimitui.events import Event, LogLine
from kimitui.session import Session

_SEQ = re.compile(r"seq=(\d+)")


def seq_in_text(text: str) -> int:
    """``seq=0001234`` -> 1234; -1 for a line without one."""
    m = _SEQ.search(text)
    return int(m.group(1)) if m else -1


@dataclass(frozen=True)
class LagFigures:
    lines: int
    p50_s: float
    p99_s: float
    max_s: float
    unshown: int
    """Lines published that no painted row covered by the end of the run."""

    def __str__(self) -> str:
        return (f"p50 {self.p50_s * 1000:.0f} ms  p99 {self.p99_s * 1000:.0f} ms  max {self.max_s * 1000:.0f} ms"
                f"  over {self.lines} lines")


class LagProbe:
    """Hooks a session (publish times) and a ``Log`` (paint times); :meth:`figures` pairs them."""

    def __init__(self, session: Session, log: Log, seq_of: Callable[[str], int] = seq_in_text) -> None:
        self.seq_of = seq_of
        self.published: dict[int, float] = {}
        self.painted: list[tuple[float, int]] = []
        """(when, seq) each time a row newer than any painted before was painted."""
        self._newest_painted = -1
        self._log = log
        self._remove = session.add_sink(self._on_event)
        self._render_line = log.render_line
        log.render_line = self._on_render_line  # type: ignore[method-assign]  # a probe around the widget's own

    def _on_event(self, ev: Event) -> None:
        if isinstance(ev, LogLine):
            seq = self.seq_of(ev.raw)
            if seq >= 0:
                self.published.setdefault(seq, time.perf_counter())

    def _on_render_line(self, y: int) -> Strip:
        strip = self._render_line(y)
        row = int(self._log.scroll_offset.y) + y
        lines = self._log.lines
        if row < len(lines):
            seq = self.seq_of(lines[row])
            if seq > self._newest_painted:
                self._newest_painted = seq
                self.painted.append((time.perf_counter(), seq))
        return strip

    @property
    def newest_painted(self) -> int:
        return self._newest_painted

    def close(self) -> None:
        self._remove()
        self._log.render_line = self._render_line  # type: ignore[method-assign]

    def figures(self, since: float = 0.0, until: float | None = None) -> LagFigures:
        """Lags of the lines published in [since, until] (perf_counter times); an unshown line's lag runs to now."""
        end = time.perf_counter()
        until = end if until is None else until
        lags: list[float] = []
        unshown = 0
        painted = iter(self.painted)
        paint = next(painted, None)
        for seq, t in sorted(self.published.items()):
            while paint is not None and paint[1] < seq:
                paint = next(painted, None)
            if not since <= t <= until:
                continue
            if paint is None:
                unshown += 1
                lags.append(end - t)
            else:
                lags.append(max(0.0, paint[0] - t))
        if not lags:
            return LagFigures(0, 0.0, 0.0, 0.0, 0)
        lags.sort()
        p99 = lags[max(0, -(-len(lags) * 99 // 100) - 1)]
        return LagFigures(len(lags), statistics.median(lags), p99, lags[-1], unshown)


class RunQueueWait:
    """How long the kernel kept this thread (the event loop's) waiting for a CPU while it was ready to run.

    The panel's promise (a line on screen within a second) is about kimitui's own delay. On a box whose
    cores other processes keep busy, the loop also waits its turn for a core; that time is the machine's,
    and a test adds it to the promise instead of testing the machine.  Linux's ``/proc/thread-self/schedstat``
    (its second field, in ns); 0 where it cannot be read.
    """

    def __init__(self) -> None:
        self._start = self._read()

    @staticmethod
    def _read() -> float:
        try:
            with open("/proc/thread-self/schedstat") as f:
                return int(f.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            return 0.0

    def seconds(self) -> float:
        return max(0.0, self._read() - self._start)
