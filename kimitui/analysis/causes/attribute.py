"""The cause of a straggler: what overlapped its slow stretches, how much of them, and how sure that is.

Each slow stretch is cut at every episode boundary inside it.  A piece where a stall cause was active
(EPLB, KV retraction, a prefill surge, the server down, the client stalled, the link lost) goes to
that cause, split evenly when several were; a piece with only a slowing state (no CUDA graph,
throttled or slow GPU, saturated PCIe) goes to the state; a piece with neither is unknown.  A state
that held over most of the level slowed every request alike, the median ones too, so it explains
nothing about one of them and is left out.  Weak evidence (every GPU idle while requests were running:
the server stood still, but nothing it said tells why) ranks with the states, and alone is never more
than "likely".

The straggler's lost time (beyond the median pace) is split the same way.  The main cause is the one
with the most; the confidence is how much of the lost time it covers: high from 80 %, medium from
50 %, low from 25 %; under that the answer is *unknown*, never a guess dressed as a cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kimitui.analysis.causes.catalogue import STALL, STATE, Confidence, label
from kimitui.analysis.causes.episodes import Episode
from kimitui.analysis.causes.stretches import Stretch, slow_stretches
from kimitui.analysis.causes.timeline import CauseTimeline
from kimitui.events import RequestResult, Straggler

HIGH, MEDIUM, LOW = 0.8, 0.5, 0.25
LEVEL_WIDE = 0.8
"""A state active over this much of the level is the level's condition, not one request's cause."""


@dataclass(frozen=True)
class CauseShare:
    """One cause's part in a straggler's slow time."""

    cause: str
    lost_s: float
    """Its share of the time lost beyond the median pace."""
    share: float
    """``lost_s`` as a fraction of all the straggler's lost time."""
    evidence: tuple[str, ...] = ()
    episodes: tuple[str, ...] = ()
    """Keys of the episodes that overlapped (one rebalance hitting two stretches counts once)."""
    episode_s: float = 0.0
    episode_open: bool = False
    """An episode of this cause had not ended (a rebalance whose end line has not come): its length is so far."""
    """The longest such episode's own length (``rebalance end time=``'s figure for EPLB)."""


@dataclass(frozen=True)
class Attribution:
    """Why one straggler was slow."""

    request_id: str
    concurrency: int
    cause: str
    """The main cause, or ``unknown``."""
    confidence: Confidence
    coverage: float
    """The main cause's share of the lost time."""
    lost_s: float
    stretches: tuple[Stretch, ...] = ()
    shares: tuple[CauseShare, ...] = ()
    """Every cause with a part, biggest first; ``unknown`` holds what nothing covered."""
    gpu_note: str = ""
    """What the GPUs did in the worst stretch (:func:`~.gpu_figures.gpu_words`, each GPU's mean against the span
    before it): ``all 8 GPUs fell from 88–93 % to 8–11 % utilisation, PCIe 21 GB/s``.  The straggler's detail
    quotes it for the same gap (:func:`kimitui.analysis.gap_evidence.headline`): one number per fact."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def share_of(self, cause: str) -> CauseShare | None:
        return next((s for s in self.shares if s.cause == cause), None)

    @property
    def known(self) -> bool:
        return self.cause != "unknown"


def _level_wide(timeline: CauseTimeline, span: tuple[float, float] | None) -> set[str]:
    if span is None or span[1] <= span[0]:
        return set()
    a, b = span
    covered: dict[str, float] = {}
    for ep in timeline.episodes(a, b):
        if ep.cause in STATE:
            covered[ep.cause] = covered.get(ep.cause, 0.0) + ep.overlap(a, b)
    return {c for c, s in covered.items() if s >= LEVEL_WIDE * (b - a)}


def _split(st: Stretch, eps: list[Episode]) -> dict[str, float]:
    """Seconds of ``st`` per cause (``unknown`` for the rest), cut at every episode edge inside it."""
    edges = sorted({st.start, st.end, *(t for ep in eps for t in (ep.start, ep.end) if st.start < t < st.end)})
    out: dict[str, float] = {}
    for x, y in zip(edges, edges[1:]):
        mid = (x + y) / 2
        here = [ep for ep in eps if ep.start <= mid <= ep.end]
        strong = {ep.cause for ep in here if ep.cause in STALL and not ep.figures.get("weak")}
        weak = {ep.cause for ep in here if ep.cause in STATE or ep.figures.get("weak")}
        pick = strong or weak or {"unknown"}
        for cause in pick:
            out[cause] = out.get(cause, 0.0) + (y - x) / len(pick)
    return out


def attribute(straggler: Straggler, result: RequestResult | None, timeline: CauseTimeline,
              level_span: tuple[float, float] | None = None) -> Attribution:
    """Name the cause of one straggler's slowness from the episodes on ``timeline``."""
    stretches = slow_stretches(result, straggler)
    wide = _level_wide(timeline, level_span)
    lost: dict[str, float] = {}
    evidence: dict[str, list[str]] = {}
    keys: dict[str, dict[str, float]] = {}
    strong: set[str] = set()
    still_open: set[str] = set()
    for st in stretches:
        eps = [ep for ep in timeline.episodes(st.start, st.end) if ep.cause not in wide and ep.overlap(st.start, st.end) > 0]
        seconds = _split(st, eps)
        for cause, s in seconds.items():
            lost[cause] = lost.get(cause, 0.0) + st.lost_s * s / max(st.duration_s, 1e-9)
        for ep in sorted(eps, key=lambda e: -e.overlap(st.start, st.end)):
            if ep.cause in seconds:
                said = evidence.setdefault(ep.cause, [])
                if ep.evidence and ep.evidence not in said:
                    said.append(ep.evidence)
                keys.setdefault(ep.cause, {})[ep.key] = float(ep.figures.get("duration_s", ep.duration_s))
                if not ep.figures.get("weak"):
                    strong.add(ep.cause)
                if ep.open:
                    still_open.add(ep.cause)
    total = sum(st.lost_s for st in stretches)
    shares = tuple(sorted(
        (CauseShare(c, s, s / total if total > 0 else 0.0, tuple(evidence.get(c, ())[:4]), tuple(keys.get(c, {})),
                    max(keys.get(c, {}).values(), default=0.0), c in still_open) for c, s in lost.items() if s > 0),
        key=lambda x: (x.cause == "unknown", -x.lost_s)))
    main = next((s for s in shares if s.cause != "unknown"), None)
    coverage = main.share if main is not None else 0.0
    confidence: Confidence = "high" if coverage >= HIGH else "medium" if coverage >= MEDIUM else "low" if coverage >= LOW else "none"
    cause = main.cause if main is not None and confidence != "none" else "unknown"
    if confidence == "high" and cause not in strong:
        confidence = "medium"  # a weak sign alone (idle GPUs) says the server stood still, not why
    worst = stretches[0] if stretches else None
    notes = _notes(timeline, worst, wide)
    return Attribution(straggler.request_id, straggler.concurrency, cause, confidence, coverage, total,
                       tuple(stretches), shares, timeline.gpu_note(worst.start, worst.end) if worst else "", notes)


def _notes(timeline: CauseTimeline, worst: Stretch | None, wide: set[str]) -> tuple[str, ...]:
    out = [f"{label(c)} held over most of the level: it slowed every request alike, not this one"
           for c in sorted(wide)]
    if worst is not None and timeline.skipped_rebalances(worst.start - 1.0, worst.end + 1.0):
        out.append("an EPLB rebalance was skipped in this stretch (balance above the threshold): it stalled nothing")
    return tuple(out)
