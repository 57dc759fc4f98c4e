"""When a log line or a GPU sample happened, on the client's clock, however late the SSH link delivered it.

kimitui stamps a followed file's log line with the time it *arrived* (``LogLine.t``) and a GPU sample
likewise (``GpuSample.t``).  Over a slow or congested SSH link both arrive seconds late, and a stall
seen through arrival times lands seconds after the gap it caused.  Each stream carries when it
happened on the host:

* a GPU sample's ``host_t`` is the agent's ``time.time()`` when NVML was read: used as is (host and
  client clocks are NTP-synchronised on any serving fleet; the link's delay is what moves);
* a log line's own timestamp (``[2025-11-30 10:21:07 TP0]``) has one-second resolution and no time
  zone.  :class:`LogClock` estimates the stream's delivery lag as the smallest (arrival − stamp) seen
  over recent lines (a line printed just at a second's turn arrives exactly one lag later), takes the
  time zone out as a whole number of quarter hours, and places each line at arrival − lag, clamped
  inside the second its own stamp names.  A journal entry's ``t`` is already the host's
  ``__REALTIME_TIMESTAMP``: its lag comes out ~0 and nothing moves.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from datetime import datetime

from kimitui.events import GpuSample, LogLine
from kimitui.sglang.log import line_fields

LAG_WINDOW = 256
LAG_WINDOW_S = 10.0
"""Lines (and seconds of arrivals) the lag estimate looks back over: enough for a line printed at a second's
turn, short enough to follow a link whose delay changes."""
TZ_STEP_S = 900.0
"""Time zones differ by whole quarter hours: the part of (arrival − stamp) that is not the link's delay."""


@functools.lru_cache(maxsize=64)
def _minute(prefix: str) -> float | None:
    """``2025-11-30 10:21`` as local epoch seconds (a log has few distinct minutes: cached)."""
    try:
        return time.mktime(datetime.strptime(prefix, "%Y-%m-%d %H:%M").timetuple())
    except (ValueError, OverflowError):
        return None


def stamp_epoch(ts: str) -> tuple[float, float] | None:
    """``2025-11-30 10:21:07(.123)`` as local epoch seconds and its resolution; None when it is not a stamp."""
    whole, _, frac = ts.partition(".")
    base = _minute(whole[:16]) if len(whole) == 19 and whole[16] == ":" else None
    secs = whole[17:]
    if base is None or not secs.isdigit():
        return None
    base += int(secs)
    if frac.isdigit():
        return base + float("0." + frac), 10.0 ** -len(frac)
    return base, 1.0


class LogClock:
    """Places each log line of one stream on the client's clock (see the module doc)."""

    def __init__(self) -> None:
        self._seen = 0
        self._low: deque[tuple[int, float, float]] = deque()
        """(line number, arrival, arrival − stamp), offsets increasing: the sliding window's minimum is first."""
        self.lag_s = 0.0
        """The link's delivery delay as last estimated."""
        self.zone_s = 0.0
        """Arrival minus stamp that is the time zones' difference, not the link (-3600: the host's stamps
        read an hour ahead of the client's clock)."""

    def place(self, line: LogLine) -> float:
        """When ``line`` was printed, on the client's clock."""
        ts = line_fields(line).get("ts")
        stamp = stamp_epoch(ts) if isinstance(ts, str) else None
        if stamp is None:
            return line.t - self.lag_s
        at, resolution = stamp
        low = self._slide(line.t, line.t - at)
        self.zone_s = round(low / TZ_STEP_S) * TZ_STEP_S
        self.lag_s = max(0.0, low - self.zone_s)
        lo = at + self.zone_s
        return min(max(line.t - self.lag_s, lo), lo + resolution)

    def _slide(self, arrived: float, offset: float) -> float:
        """The smallest offset among the last :data:`LAG_WINDOW` lines of the last :data:`LAG_WINDOW_S`
        seconds, in O(1) amortised."""
        self._seen += 1
        low = self._low
        while low and low[-1][2] >= offset:
            low.pop()
        low.append((self._seen, arrived, offset))
        while low[0][0] <= self._seen - LAG_WINDOW or low[0][1] < arrived - LAG_WINDOW_S:
            low.popleft()
        return low[0][2]


def sample_time(sample: GpuSample) -> float:
    """When NVML was read: the agent's own clock, else (an old recording) when the sample arrived."""
    return sample.host_t if isinstance(sample.host_t, (int, float)) and sample.host_t > 0 else sample.t
