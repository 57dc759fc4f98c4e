"""Every cause's episodes on one time axis, fed event by event, looked up by time span.

The cockpit feeds it live, replay feeds it the recording, a report feeds it the file: the same
episodes come out of the same events.  Bounded: each cause keeps its latest ``keep`` episodes and
the GPU moments their own ring, so a day-long session holds a few megabytes.
"""

from __future__ import annotations

from kimitui.analysis.causes.catalogue import INFO
from kimitui.analysis.causes.episodes import Episode
from kimitui.analysis.causes.event_clock import LogClock, sample_time
from kimitui.analysis.causes.gpu_sources import GpuSources
from kimitui.analysis.causes.log_sources import LOG_KINDS, LogSources
from kimitui.analysis.causes.pd_sources import PdSources
from kimitui.analysis.causes.session_sources import SessionSources
from kimitui.events import GpuSample, LogLine, ServerStats
from kimitui.sglang.log import fields_if

KEEP_EPISODES = 2048


class CauseTimeline:
    """Cause episodes from the events of one host (or a whole session: every host's go on one axis)."""

    def __init__(self, keep: int = KEEP_EPISODES) -> None:
        self.keep = keep
        self.lists: dict[str, list[Episode]] = {cause: [] for cause in INFO if cause != "unknown"}
        self._clocks: dict[tuple[str, str], LogClock] = {}
        self._logs: dict[str, LogSources] = {}
        self.gpus = GpuSources(self.lists)
        self.session = SessionSources(self.lists)
        self.pd = PdSources(self.lists)
        self.last_t: float | None = None
        self._added = 0

    def add(self, event: object) -> None:
        """Fold one event in; anything that says nothing about a stall is ignored."""
        if isinstance(event, LogLine):
            clock = self._clocks.get((event.host, event.source))
            if clock is None:
                clock = self._clocks[(event.host, event.source)] = LogClock()
            at = clock.place(event)
            decode, prefill = fields_if(event, "decode"), fields_if(event, "prefill")
            batch = decode or prefill
            if batch is not None:
                running = batch.get("running_reqs")
                if isinstance(running, (int, float)) and not isinstance(running, bool):
                    new_seq = prefill.get("new_seq", 0) if prefill is not None else 0
                    self.gpus.running = (at, float(running) + float(new_seq or 0))
            if decode is not None:
                self.pd.add_decode(event.host, decode, at)
            if event.line_kind in LOG_KINDS:
                logs = self._logs.get(event.host)
                if logs is None:
                    logs = self._logs[event.host] = LogSources(self.lists)
                logs.add(event, at)
        elif isinstance(event, GpuSample):
            self.gpus.add(event.gpus, sample_time(event))
        elif isinstance(event, ServerStats):
            self.pd.add_stats(event.host, event.extra, event.t)
        else:
            self.session.add(event)
        t = getattr(event, "t", None)
        if isinstance(t, (int, float)):
            self.last_t = t if self.last_t is None else max(self.last_t, t)
        self._added += 1
        if self._added % 1024 == 0:
            self._trim()

    def _trim(self) -> None:
        for eps in self.lists.values():
            if len(eps) > self.keep:
                del eps[: len(eps) - self.keep]

    def episodes(self, a: float, b: float, pad_s: float = 0.0) -> list[Episode]:
        """Every episode overlapping ``[a - pad_s, b + pad_s]``; open ones reach the latest event."""
        lo, hi = a - pad_s, b + pad_s
        now = self.last_t
        out = []
        for eps in self.lists.values():
            for ep in eps:
                end = max(ep.end, now) if ep.open and now is not None else ep.end
                if ep.start <= hi and end >= lo:
                    out.append(ep if not ep.open or end == ep.end else _closed_at(ep, end))
        return out

    def skipped_rebalances(self, a: float, b: float) -> list[float]:
        """When an EPLB rebalance was skipped inside ``[a, b]``."""
        return [t for logs in self._logs.values() for t in logs.skips if a <= t <= b]

    def gpu_note(self, a: float, b: float) -> str:
        return self.gpus.note(a, b)


def _closed_at(ep: Episode, end: float) -> Episode:
    """A copy of a still-open episode as if it ended at ``end`` (the lookup must not move the original)."""
    return Episode(ep.cause, ep.start, end, ep.evidence, key=ep.key, open=True, figures=dict(ep.figures))
