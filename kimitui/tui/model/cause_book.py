"""The cockpit's causes: every event folded into a cause timeline, each finished level's stragglers attributed.

The SSH link may deliver a level's log lines and GPU samples seconds after the level's result, so a
level is attributed when its result arrives and again while events may still come for :data:`SETTLE_S`
of event time after it, at most once every :data:`REFRESH_S` of event time and only when what the
timeline holds over the level's span changed (a full re-attribution of a C=256 level whose every
request stalled costs ~0.1 s: never per event).  Then its answers are final and what the
re-attribution needed (the stragglers' chunk times, the level's figures) is let go.  No Textual here:
the straggler list, the detail screen, the level table and the compare view read it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.causes.event_clock import sample_time
from kimitui.analysis.causes.sweep_causes import attribute_level, level_span
from kimitui.analysis.causes.tail import LevelLoss
from kimitui.analysis.causes.timeline import CauseTimeline
from kimitui.events import GpuSample, LevelResult, RequestResult

SETTLE_S = 20.0
"""Event time after a level's result during which late events may still change its attribution."""
REFRESH_S = 1.0
"""At most one re-attribution per this much event time."""
KEEP_SWEEPS = 8
"""Sweeps whose level losses are kept (the compare view's verdict reads them)."""
KEEP_GPU_MOMENTS = 7_200
"""GPU samples the cockpit's timeline keeps for its GPU notes: 30 min at the agent's 4 Hz, more than a
settling level spans (the timeline's own 20 000 grew the cockpit by ~4 MB over its first 80 min)."""

Attributions = dict[str, Attribution]
"""Request id -> why that straggler was slow."""
Losses = dict[tuple[int, int], LevelLoss]
"""(C, repeat) -> where the level's throughput went."""


@dataclass
class _Settling:
    """A finished level whose answers may still change, and where they are written."""

    level: LevelResult
    results: list[RequestResult]
    """The level's measured requests: figures only, but the stragglers' with their chunk times."""
    span: tuple[float, float]
    """From the first send to the last end, and every straggler's gap: where its causes lie."""
    attributions: Attributions
    losses: Losses


class CauseBook:
    """The cause timeline of every event, the levels still settling, and the losses of recent sweeps' levels."""

    def __init__(self) -> None:
        self.timeline = CauseTimeline()
        self.timeline.gpus.moments = deque(maxlen=KEEP_GPU_MOMENTS)
        self.losses: dict[str, Losses] = {}
        """Sweep id -> its levels' losses, the last :data:`KEEP_SWEEPS` sweeps (the compare view reads older ones)."""
        self._settling: list[_Settling] = []
        self._refreshed: float | None = None
        self._seen: object = None
        """What the timeline held over the settling levels' spans when they were last attributed."""
        self._gpu_in_span = 0
        """GPU samples taken inside a settling level's span (a late one changes its GPU note)."""
        self.reattributed = 0
        """Looks that found the evidence changed and attributed the settling levels again (tests read it)."""

    def add(self, event: object) -> None:
        """Every event goes to the timeline (it keeps what tells a cause, and its clock from all of them)."""
        self.timeline.add(event)
        if self._settling and isinstance(event, GpuSample):
            if sample_time(event) <= max(s.span[1] for s in self._settling):
                self._gpu_in_span += 1

    def sweep_started(self, sweep_id: str) -> Losses:
        """The new sweep's losses (its SweepView holds the same dict); a level of the sweep before still
        settles into its own."""
        losses: Losses = {}
        self.losses[sweep_id] = losses
        while len(self.losses) > KEEP_SWEEPS:
            del self.losses[next(iter(self.losses))]
        return losses

    def level_done(self, level: LevelResult, results: list[RequestResult], attributions: Attributions,
                   losses: Losses) -> None:
        """Attribute a finished level into ``attributions``/``losses`` now; keep it to re-attribute while late
        events may arrive (``results``: its measured requests, the stragglers' with their chunk times)."""
        spans = [sp] if (sp := level_span(results)) is not None else []
        spans += [(s.gap_start, s.gap_end) for s in level.stragglers if s.gap_start and s.gap_end]
        span = (min(a for a, _ in spans), max(b for _, b in spans)) if spans else (level.t, level.t)
        settling = _Settling(level, results, span, attributions, losses)
        self._attribute(settling)
        if level.stragglers:
            self._settling.append(settling)
            self._seen = None  # the next look attributes again, over the new span too

    def _attribute(self, s: _Settling) -> bool:
        """Attribute ``s`` with every event so far; True when an answer changed."""
        attrs, loss = attribute_level(s.level, s.results, self.timeline)
        key = (s.level.concurrency, s.level.repeat)
        changed = s.losses.get(key) != loss or any(s.attributions.get(a.request_id) != a for a in attrs)
        s.attributions.update((a.request_id, a) for a in attrs)
        s.losses[key] = loss
        return changed

    def refresh(self, now: float | None) -> bool:
        """Re-attribute the settling levels if their evidence changed (throttled); True when an answer changed.

        ``now``: the newest event time.  A level whose window closed gets one last look, then is final."""
        if not self._settling or now is None:
            return False
        closing = any(now - s.level.t >= SETTLE_S for s in self._settling)
        if not closing and self._refreshed is not None and now - self._refreshed < REFRESH_S:
            return False
        self._refreshed = now
        seen = self._evidence()
        changed = False
        if seen != self._seen:
            self._seen = seen
            self.reattributed += 1
            changed = any([self._attribute(s) for s in self._settling])  # every level, not up to the first change
        self._settling = [s for s in self._settling if now - s.level.t < SETTLE_S]
        return changed

    def _evidence(self) -> object:
        """What an attribution of the settling levels reads: the episodes over their spans (an open one up to
        the span's end), the skipped rebalances in them and how many GPU samples fell inside."""
        lo = min(s.span[0] for s in self._settling)
        hi = max(s.span[1] for s in self._settling)
        episodes = tuple((ep.cause, ep.key, ep.start, min(ep.end, hi), ep.open, ep.evidence,
                          tuple(sorted(ep.figures.items()))) for ep in self.timeline.episodes(lo, hi))
        return episodes, len(self.timeline.skipped_rebalances(lo - 1.0, hi + 1.0)), self._gpu_in_span

    @property
    def settling(self) -> int:
        """Levels whose answers may still change (what they need is kept until then)."""
        return len(self._settling)

    def loss(self, sweep_id: str, concurrency: int, repeat: int = 0) -> LevelLoss | None:
        return self.losses.get(sweep_id, {}).get((concurrency, repeat))
