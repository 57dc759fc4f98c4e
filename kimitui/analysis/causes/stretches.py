"""Where a request's stream went slow: its stretches against the level's median decode rate.

Between two content chunks a request at the level's median rate takes ``tokens / median`` seconds.
A request that waited for its first token far longer than the level's others (the straggler rule's
TTFT leg) has that wait as a stretch too, its ``lost_s`` the wait beyond the level's median TTFT.
An interval at least twice that is slow; slow intervals a few normal ones apart are one stretch (a
throttled GPU slows a run of steps, a stall is one long interval).  A stretch's ``lost_s`` is the time
beyond the median pace: what the tail accounting splits by cause.  Without the request's chunk times
(an old recording, a failed request) the straggler's own longest gap is the one stretch.
"""

from __future__ import annotations

from dataclasses import dataclass

from kimitui.analysis.level_stats import chunk_times
from kimitui.events import RequestResult, Straggler

SLOW_FACTOR = 2.0
"""An interval this many times its median-pace length is slow (the straggler rule's 0.5 x median)."""
JOIN_NORMAL = 3
"""Slow intervals with at most this many normal intervals between them are one stretch."""
KEEP_FRACTION = 0.2
"""A stretch is kept when it lost at least this share of the worst stretch's time."""
MAX_STRETCHES = 5


@dataclass(frozen=True)
class Stretch:
    """``[start, end]`` on the client's clock; ``gap``: a single interval without tokens (a stall)."""

    start: float
    end: float
    tokens: float
    lost_s: float
    gap: bool

    @property
    def duration_s(self) -> float:
        return self.end - self.start


def _intervals(result: RequestResult) -> list[tuple[float, float, float]]:
    """(start, end, tokens) between consecutive content chunks (the first chunk ends the TTFT, not decode)."""
    times = chunk_times(result)
    return [(a[0], b[0], b[1]) for a, b in zip(times, times[1:]) if b[0] >= a[0]]


def _group(intervals: list[tuple[float, float, float]], median: float) -> list[list[int]]:
    groups: list[list[int]] = []
    normal_run = 0
    for i, (a, b, n) in enumerate(intervals):
        expected = n / median
        if b - a >= SLOW_FACTOR * expected:
            if groups and normal_run <= JOIN_NORMAL:
                groups[-1].extend(range(groups[-1][-1] + 1, i + 1))
            else:
                groups.append([i])
            normal_run = 0
        else:
            normal_run += 1
    return groups


def slow_stretches(result: RequestResult | None, straggler: Straggler) -> list[Stretch]:
    """The request's slow stretches, worst first (at most :data:`MAX_STRETCHES`)."""
    median = straggler.median_decode_tok_s
    found: list[Stretch] = []
    if result is not None and median and median > 0:
        intervals = _intervals(result)
        for group in _group(intervals, median):
            parts = [intervals[i] for i in group]
            tokens = sum(p[2] for p in parts)
            lost = sum((b - a) - n / median for a, b, n in parts)
            if lost > 0:
                found.append(Stretch(parts[0][0], parts[-1][1], tokens, lost, len(parts) == 1))
    if result is not None and straggler.ttft_s is not None:  # the wait for its first token: a gap of its own
        lost = straggler.ttft_s - (straggler.median_ttft_s or 0.0)
        if lost > 0:
            found.append(Stretch(result.sent, result.sent + straggler.ttft_s, 1.0, lost, True))
    if not found and straggler.gap_start is not None and straggler.max_gap_s:
        end = straggler.gap_end if straggler.gap_end is not None else straggler.gap_start + straggler.max_gap_s
        lost = straggler.max_gap_s - (1.0 / median if median else 0.0)
        found.append(Stretch(straggler.gap_start, end, 1.0, max(lost, 0.0), True))
    if not found and result is not None:
        times = chunk_times(result)
        if len(times) > 1 and median:
            span = times[-1][0] - times[0][0]
            tokens = sum(n for _, n in times[1:])
            found.append(Stretch(times[0][0], times[-1][0], tokens, max(0.0, span - tokens / median), False))
    found.sort(key=lambda s: -s.lost_s)
    worst = found[0].lost_s if found else 0.0
    return [s for s in found if s.lost_s >= KEEP_FRACTION * worst][:MAX_STRETCHES]
