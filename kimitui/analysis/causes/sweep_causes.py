"""Causes for a whole recorded sweep (or many): every straggler attributed, every level's loss split.

What a report, ``kimitui report --vs``, the bench and tests call on a list of events.  All events are
folded into the timeline first and only then attributed, so a log line or a GPU sample the link
delivered after the level's result still counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kimitui.analysis.causes.attribute import Attribution, attribute
from kimitui.analysis.causes.tail import LevelLoss, level_loss
from kimitui.analysis.causes.timeline import CauseTimeline
from kimitui.events import LevelResult, LevelStarted, RequestResult

CAUSE_KINDS = frozenset({"log_line", "gpu_sample", "server_health", "profile_state", "swap_progress",
                         "client_health", "connection"})
"""The event kinds a :class:`CauseTimeline` reads (a reader of a recording can skip the rest)."""

LevelKey = tuple[str, int, int]
"""(sweep id, concurrency, repeat)."""


@dataclass
class SweepCauses:
    """Per straggler its attribution, per level its loss, keyed by request id and (sweep, C, repeat)."""

    attributions: dict[str, Attribution] = field(default_factory=dict)
    losses: dict[LevelKey, LevelLoss] = field(default_factory=dict)
    timeline: CauseTimeline = field(default_factory=CauseTimeline)

    def loss(self, sweep_id: str, concurrency: int, repeat: int = 0) -> LevelLoss | None:
        return self.losses.get((sweep_id, concurrency, repeat))

    def losses_of(self, sweep_id: str) -> list[LevelLoss]:
        return [v for (s, _, _), v in sorted(self.losses.items()) if s == sweep_id]


def level_span(results: Iterable[RequestResult]) -> tuple[float, float] | None:
    """From the first send to the last end among a level's requests."""
    spans = [(r.sent, r.sent + r.e2e_s) for r in results if r.e2e_s is not None]
    return (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None


def attribute_level(level: LevelResult, results: list[RequestResult], timeline: CauseTimeline) -> tuple[list[Attribution], LevelLoss]:
    """Attribute one level's stragglers (``results``: its measured requests, chunk offsets kept where they were)."""
    by_id = {r.request_id: r for r in results}
    span = level_span(results)
    attrs = [attribute(s, by_id.get(s.request_id), timeline, span) for s in level.stragglers]
    return attrs, level_loss(level, results, attrs)


def sweep_causes(events: Iterable[object]) -> SweepCauses:
    """Fold ``events`` (a recording's, in its order) and attribute every level of every sweep in it."""
    out = SweepCauses()
    repeat: dict[tuple[str, int], int] = {}
    results: dict[LevelKey, list[RequestResult]] = {}
    levels: list[LevelResult] = []
    for ev in events:
        if isinstance(ev, RequestResult):
            if not ev.warmup:
                key = (ev.sweep_id, ev.concurrency, repeat.get((ev.sweep_id, ev.concurrency), 0))
                results.setdefault(key, []).append(ev)
        elif isinstance(ev, LevelStarted):
            repeat[(ev.sweep_id, ev.concurrency)] = ev.repeat
        elif isinstance(ev, LevelResult):
            levels.append(ev)
        else:
            out.timeline.add(ev)
    for lv in levels:
        attrs, loss = attribute_level(lv, results.get((lv.sweep_id, lv.concurrency, lv.repeat), []), out.timeline)
        out.attributions.update((a.request_id, a) for a in attrs)
        out.losses[(lv.sweep_id, lv.concurrency, lv.repeat)] = loss
    return out
