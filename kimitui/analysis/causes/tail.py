"""A level's shortfall against its own median decode rate, split by cause.

A request decoding at the level's median rate would have taken ``(tokens - 1) / median`` seconds
after its first token; what it took beyond that is its *excess*.  The level would have delivered
``agg × Σe2e / Σ(e2e − excess)`` at that pace (the seed-comparable aggregate with every request's
excess removed: at C=1 exactly the wall time without the stalls).  The stragglers' attributions
split their excess by cause; what they leave, and every other request's excess, is *spread* (the
ordinary unevenness of a busy server, not a stall).  For the seeds' C=1 case: "aggregate 13.3 tok/s
vs 61 expected: 96 % of the loss is one EPLB rebalance".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.causes.catalogue import counted, label, plural, short
from kimitui.events import LevelResult, RequestResult

SPREAD = "spread"
SMALL_LOSS = 0.05
"""Under this share of the expected aggregate, the level delivered what its median pace promised."""


@dataclass(frozen=True)
class LevelLoss:
    """Where one level's throughput went."""

    concurrency: int
    repeat: int
    agg_tok_s: float | None
    expected_tok_s: float | None
    lost_s: float
    """Request-seconds beyond the median pace, over the level's completed requests."""
    by_cause: dict[str, float] = field(default_factory=dict)
    """cause -> request-seconds; ``unknown``: straggler time nothing explains; ``spread``: the rest."""
    episodes: dict[str, dict[str, float]] = field(default_factory=dict)
    """cause -> {episode key: its length}: "3 EPLB rebalances, 71 s in all"."""

    def share(self, cause: str) -> float:
        return self.by_cause.get(cause, 0.0) / self.lost_s if self.lost_s > 0 else 0.0

    @property
    def loss_fraction(self) -> float:
        if not self.agg_tok_s or not self.expected_tok_s:
            return 0.0
        return max(0.0, 1.0 - self.agg_tok_s / self.expected_tok_s)

    @property
    def main_cause(self) -> str | None:
        """The cause (not spread) with the biggest part of the loss, when the loss is worth naming."""
        if self.loss_fraction < SMALL_LOSS:
            return None
        named = [(s, c) for c, s in self.by_cause.items() if c not in (SPREAD,) and s > 0]
        return max(named)[1] if named else None

    def cell(self) -> str:
        """The level table's cell: ``EPLB 96%``, ``–`` when nothing is worth naming."""
        cause = self.main_cause
        return f"{short(cause)} {pct(self.share(cause)).replace(' ', '')}" if cause else "–"

    def sentence(self) -> str:
        """``aggregate 13.3 tok/s vs 61 expected: 96 % of the loss is one EPLB rebalance``."""
        if self.agg_tok_s is None or self.expected_tok_s is None:
            return "no completed requests to account for"
        head = f"aggregate {_rate(self.agg_tok_s)} tok/s vs {_rate(self.expected_tok_s)} expected"
        if self.loss_fraction < SMALL_LOSS:
            return f"{head}: delivered what its median decode rate promised"
        cause = self.main_cause
        if cause is None:
            return f"{head}: the loss is spread over the requests, no stall behind it"
        n = len(self.episodes.get(cause, {}))
        what = counted(cause, n) if n and cause != "unknown" else ("unexplained stragglers" if cause == "unknown" else label(cause))
        return f"{head}: {pct(self.share(cause))} of the loss is {what}"


def _rate(v: float) -> str:
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _excess(r: RequestResult, median: float) -> float:
    if r.e2e_s is None or r.ttft_s is None or r.completion_tokens < 2:
        return 0.0
    return max(0.0, (r.e2e_s - r.ttft_s) - (r.completion_tokens - 1) / median)


def level_loss(level: LevelResult, results: Sequence[RequestResult], attributions: Iterable[Attribution]) -> LevelLoss:
    """Split ``level``'s shortfall by cause; ``results`` are its measured requests (warm-up excluded)."""
    done = [r for r in results if r.ok and not r.warmup and r.e2e_s]
    median = level.decode_tok_s.p50
    if not done or not median or median <= 0:
        return LevelLoss(level.concurrency, level.repeat, level.agg_tok_s, None, 0.0)
    excess = {r.request_id: _excess(r, median) for r in done}
    total_e2e = sum(r.e2e_s or 0.0 for r in done)
    lost = sum(excess.values())
    paced = total_e2e - lost
    expected = level.agg_tok_s * total_e2e / paced if level.agg_tok_s and paced > 0 else level.agg_tok_s
    by_cause: dict[str, float] = {}
    episodes: dict[str, dict[str, float]] = {}
    for a in attributions:
        room = excess.get(a.request_id, 0.0)
        named = sum(s.lost_s for s in a.shares)
        scale = min(1.0, room / named) if named > 0 else 0.0
        for s in a.shares:
            cause = s.cause if a.known or s.cause == "unknown" else "unknown"
            by_cause[cause] = by_cause.get(cause, 0.0) + s.lost_s * scale
            if s.cause != "unknown" and a.known:
                episodes.setdefault(cause, {}).update(dict.fromkeys(s.episodes, s.episode_s))
    by_cause[SPREAD] = max(0.0, lost - sum(by_cause.values()))
    return LevelLoss(level.concurrency, level.repeat, level.agg_tok_s, expected, lost, by_cause, episodes)


def explained(losses: Iterable[LevelLoss]) -> str | None:
    """``explained by EPLB rebalances (93 % of the time lost)``: the cause behind most of a sweep's lost time.

    No count and no seconds here: how many rebalances a sweep had is said once, where they are counted in each
    level's window (:func:`kimitui.report.spec_eplb.eplb_line`); the episodes that happened to overlap a
    straggler are fewer (a report said "explained by 4 EPLB rebalances" over "9 EPLB rebalances", issue 29)."""
    lost: dict[str, float] = {}
    total = 0.0
    for loss in losses:
        total += loss.lost_s
        for cause, s in loss.by_cause.items():
            lost[cause] = lost.get(cause, 0.0) + s
    named = [(s, c) for c, s in lost.items() if c not in (SPREAD, "unknown")]
    if not named or total <= 0:
        return None
    s, cause = max(named)
    if s < 0.5 * total:
        return None
    return f"explained by {plural(cause)} ({pct(s / total)} of the time lost)"


def pct(share: float) -> str:
    """``99 %``: a share short of all of it never rounds up to 100 (the one rounding every view uses)."""
    value = min(100, round(100 * share))
    return f"{99 if value == 100 and share < 1 - 1e-9 else value} %"
