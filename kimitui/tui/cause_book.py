"""The cockpit's causes: every event folded into a cause timeline, each finished level's stragglers attributed.

The SSH link may deliver a level's log lines and GPU samples seconds after the level's result, so a
level is attributed when its result arrives and again, at most once a second of event time, while
events keep coming for :data:`SETTLE_S` after it; then its answers are final and what the
re-attribution needed (the stragglers' chunk times, the level's figures) is let go.  No Textual here:
the straggler list, the detail screen, the level table and the compare view read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.causes.sweep_causes import attribute_level
from kimitui.analysis.causes.tail import LevelLoss
from kimitui.analysis.causes.timeline import CauseTimeline
from kimitui.events import LevelResult, RequestResult

SETTLE_S = 20.0
"""Event time after a level's result during which late events may still change its attribution."""
REFRESH_S = 1.0
KEEP_SWEEPS = 8
"""Sweeps whose level losses are kept (the compare view's verdict reads them)."""


@dataclass
class _Pending:
    sweep_id: str
    level: LevelResult
    results: list[RequestResult]
    """The level's measured requests: figures only, but the stragglers' with their chunk times."""


class CauseBook:
    """Attributions of the running sweep's stragglers and the losses of recent sweeps' levels."""

    def __init__(self) -> None:
        self.timeline = CauseTimeline()
        self._attributions: dict[str, Attribution] = {}
        self.losses: dict[str, dict[tuple[int, int], LevelLoss]] = {}
        """Sweep id -> (C, repeat) -> where the level's throughput went."""
        self._pending: list[_Pending] = []
        self._refreshed = 0.0
        self._dirty = False

    @property
    def attributions(self) -> dict[str, Attribution]:
        """Request id -> why it straggled (the running sweep's stragglers), with every event so far counted."""
        if self._dirty:
            self._recompute()
        return self._attributions

    def add(self, event: object) -> None:
        self.timeline.add(event)
        if self._pending:
            self._dirty = True

    def sweep_started(self, sweep_id: str) -> None:
        self._attributions.clear()
        self._pending.clear()
        self.losses[sweep_id] = {}
        while len(self.losses) > KEEP_SWEEPS:
            del self.losses[next(iter(self.losses))]

    def level_done(self, sweep_id: str, level: LevelResult, results: list[RequestResult]) -> None:
        """Attribute a finished level now; keep it to re-attribute while late events may arrive."""
        pending = _Pending(sweep_id, level, results)
        self._attribute(pending)
        if level.stragglers:
            self._pending.append(pending)

    def _attribute(self, p: _Pending) -> None:
        attrs, loss = attribute_level(p.level, p.results, self.timeline)
        self._attributions.update((a.request_id, a) for a in attrs)
        self.losses.setdefault(p.sweep_id, {})[(p.level.concurrency, p.level.repeat)] = loss

    def refresh(self, now: float) -> bool:
        """Re-attribute the levels still settling (throttled); True when an answer changed (the views redraw)."""
        if not self._dirty or now - self._refreshed < REFRESH_S:
            return False
        self._refreshed = now
        before = (dict(self._attributions), {k: dict(v) for k, v in self.losses.items()})
        self._recompute()
        self._pending = [p for p in self._pending if now - p.level.t < SETTLE_S]
        return before != (self._attributions, self.losses)

    def _recompute(self) -> None:
        self._dirty = False
        for p in self._pending:
            self._attribute(p)

    def loss(self, sweep_id: str, concurrency: int, repeat: int = 0) -> LevelLoss | None:
        return self.losses.get(sweep_id, {}).get((concurrency, repeat))
