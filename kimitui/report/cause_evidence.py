"""The causes' evidence in a recording, read without parsing what cannot matter to a report.

A report attributes stragglers (:mod:`kimitui.analysis.causes`), so it must read log lines and GPU
samples, which are most of a recording's lines: an hour at 4 Hz is 14,400 GPU samples, each a pydantic
parse of eight readings.  Only those near a sweep can touch a straggler, so a report parses:

* GPU samples within :data:`GPU_MARGIN_S` of a sweep's span (the stretch, the level around it, the
  SSH link's delivery delay);
* log lines within :data:`LOG_MARGIN_S` of a sweep's span (a KV retraction's wait may start that early),
  and of those only the kinds the timeline reads, told apart by a byte test on the raw line;
* the few session events (health, client health, connection, profile state, swap progress) everywhere.

The spans come from the report's own events, already parsed; the index's times are the running
maximum of ``t`` in file order, so a bisection finds where a span starts and every line at or after
that position with an earlier ``t`` (delivered late) is still inside.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable

from kimitui.analysis.causes.log_sources import KV_WAIT_CAP_S, LOG_KINDS
from kimitui.analysis.causes.sweep_causes import CAUSE_KINDS
from kimitui.events import Event, LevelResult, LevelStarted, RequestResult, SweepResult, SweepStarted
from kimitui.recording import RecordingIndex

GPU_MARGIN_S = 60.0
"""GPU samples this long before and after a sweep are read too: the states the attribution compares a
stretch with, and samples the link delivered late."""
LOG_MARGIN_S = KV_WAIT_CAP_S
"""Log lines this long around a sweep: a retraction logged before the sweep can still hold requests back."""
CAUSE_LINE = re.compile(rb'"line_kind"\s*:\s*"(?:' + "|".join(LOG_KINDS).encode() + rb')"')
"""The log lines a cause timeline reads (:meth:`CauseTimeline.add`), by their ``line_kind`` in the raw JSON
(spaces allowed: a hand-written recording reads the same)."""

Span = tuple[float, float]


def sweep_spans(events: Iterable[Event]) -> list[Span]:
    """Each sweep's (first, last) time: its start, levels, requests (from their send) and result."""
    spans: dict[str, list[float]] = {}
    for ev in events:
        if isinstance(ev, (SweepStarted, LevelStarted, LevelResult, SweepResult, RequestResult)):
            lo = min(ev.t, ev.sent) if isinstance(ev, RequestResult) else ev.t
            span = spans.setdefault(ev.sweep_id, [lo, ev.t])
            span[0], span[1] = min(span[0], lo), max(span[1], ev.t)
    return sorted((a, b) for a, b in spans.values())


def positions(index: RecordingIndex, spans: Iterable[Span], margin_s: float) -> list[tuple[int, int]]:
    """The index positions ``[lo, hi)`` of the lines within ``margin_s`` of a span, overlapping ones merged."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        lo, hi = index.position(a - margin_s), index.position_after(b + margin_s)
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        elif hi > lo:
            out.append((lo, hi))
    return out


def _inside(ranges: list[tuple[int, int]], starts: list[int], i: int) -> bool:
    k = bisect_right(starts, i) - 1
    return k >= 0 and i < ranges[k][1]


def cause_events(index: RecordingIndex, spans: list[Span]) -> list[Event]:
    """The events a cause timeline reads that can bear on these sweeps, in file order (see the module doc)."""
    gpu = positions(index, spans, GPU_MARGIN_S)
    logs = positions(index, spans, LOG_MARGIN_S)
    gpu_starts, log_starts = [lo for lo, _ in gpu], [lo for lo, _ in logs]
    out: list[Event] = []
    for i, kind in enumerate(index.kinds):
        if kind == "gpu_sample":
            if not _inside(gpu, gpu_starts, i):
                continue
        elif kind == "log_line":
            if not _inside(logs, log_starts, i):
                continue
            raw = index.raw(i)
            if raw is not None and CAUSE_LINE.search(raw) is None:
                continue
        elif kind not in CAUSE_KINDS:
            continue
        ev = index.event(i)
        if ev is not None:
            out.append(ev)
    return out
