"""Python's full garbage collection at a moment the cockpit chooses, not in the middle of a key press.

Under the firehose, what the cockpit keeps (the log ring, Textual's line caches, the charts' points) is ~85k
tracked objects beyond those frozen at start, and a full collection walks them in ~55 ms (up to 180 ms on a busy
machine): it ran every ~5 s by itself, and a key pressed then waited for it (issue 33: key -> screen p99 193 ms with
both cores busy, the collector most of it).  The young generations still collect by themselves (0.1 and 2 ms); the
full one is taken off its own trigger and run by :meth:`QuietCollector.tick` once ``period_s`` has passed and no key
came for ``quiet_s`` (or at the latest after ``longest_s``), so cyclic garbage lives a minute at most.
"""

from __future__ import annotations

import gc
import time

FULL_OFF = 1 << 30
"""A full-collection threshold never reached: the third generation collects only when called."""


class QuietCollector:
    """Owns the collector's full collections while the cockpit runs (start, tick, key, stop)."""

    def __init__(self, *, period_s: float = 60.0, quiet_s: float = 1.0, longest_s: float = 180.0) -> None:
        self.period_s = period_s
        self.quiet_s = quiet_s
        self.longest_s = longest_s
        self.last_full = time.monotonic()
        self.last_key = 0.0
        self.collections = 0
        self._thresholds: tuple[int, int, int] | None = None

    def start(self) -> None:
        """Freeze what lives as long as the app (Textual, the widgets, the controller) and take over full collections."""
        gc.freeze()
        if self._thresholds is None:
            self._thresholds = gc.get_threshold()
            young, middle, _ = self._thresholds
            gc.set_threshold(young, middle, FULL_OFF)
        self.last_full = time.monotonic()

    def stop(self) -> None:
        """Hand everything back as it was: the collector's own thresholds, the frozen objects."""
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        gc.unfreeze()

    def key(self, now: float | None = None) -> None:
        """A key came: a full collection waits until the operator pauses."""
        self.last_key = time.monotonic() if now is None else now

    def tick(self, now: float | None = None) -> bool:
        """Run a full collection if one is due and no key came lately; True if it ran."""
        if self._thresholds is None:
            return False
        now = time.monotonic() if now is None else now
        since = now - self.last_full
        if since < self.period_s or (now - self.last_key < self.quiet_s and since < self.longest_s):
            return False
        gc.collect()
        self.collections += 1
        self.last_full = time.monotonic()
        return True
