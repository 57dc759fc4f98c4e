"""What a capacity search found: the probes, the curve points they pool into, and the answer.

Goodput at a point: the output tokens of the measured requests that *each* met every bound of
the SLO (completed, TTFT within the TTFT bound, decode rate above the decode bound, ...), per
second of the level's wall time.  A percentile SLO lets some requests miss (``ttft_p99`` lets
1 % miss); goodput is what the users inside the SLO got, so it is at most the aggregate tok/s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kimitui.capacity.slo import Slo, SloCheck, fmt_figure
from kimitui.events import LevelResult, RequestResult


@dataclass(frozen=True)
class Probe:
    """One measurement of one point: the level, its measured requests and the SLO judged on them."""

    x: float
    levels: tuple[LevelResult, ...]
    """Usually one; a recorded level that was repeated brings every repeat (its requests pooled)."""
    requests: list[RequestResult]
    check: SloCheck
    source: str | None = None
    """The recording it was taken from; None: measured now."""

    @property
    def level(self) -> LevelResult:
        return self.levels[0]


@dataclass(frozen=True)
class CurvePoint:
    """A point of the curve: every measurement of one x, pooled."""

    x: float
    holds: bool
    confidence: float
    check: SloCheck
    agg_tok_s: float | None
    goodput: float | None
    measurements: int
    source: str | None = None

    @property
    def values(self) -> dict[str, float | None]:
        """Each term's measured value (base units: s, tok/s, fraction) by its key."""
        return {tc.term.key: tc.value for tc in self.check.terms}

    def to_json(self, rate: bool) -> dict[str, Any]:
        return {"x": self.x if rate else int(self.x), "agg_tok_s": _round(self.agg_tok_s),
                "goodput_tok_s": _round(self.goodput), "values": {k: _round(v, 6) for k, v in self.values.items()},
                "holds": self.holds, "confidence": round(self.confidence, 3), "requests": self.check.requests,
                "ok": self.check.ok, "measurements": self.measurements, "reason": self.check.reason,
                "reused_from": self.source}


def _round(v: float | None, digits: int = 2) -> float | None:
    return None if v is None else round(v, digits)


def goodput(slo: Slo, probes: Sequence[Probe]) -> float | None:
    """Output tok/s of the requests that each met every bound (see the module's words)."""
    wall = sum(lv.wall_s for p in probes for lv in p.levels)
    if wall <= 0:
        return None
    good = sum(r.completion_tokens for p in probes for r in p.requests if not r.warmup and slo.request_meets(r))
    return good / wall


def point_of(slo: Slo, x: float, probes: Sequence[Probe]) -> CurvePoint:
    """The probes of one x pooled: one measurement's own check, or the SLO judged on all their requests."""
    if len(probes) == 1:
        check = probes[0].check
    else:
        check = slo.check([r for p in probes for r in p.requests], [lv for p in probes for lv in p.levels])
    rates = [lv.agg_tok_s for p in probes for lv in p.levels if lv.agg_tok_s is not None]
    sources = {p.source for p in probes if p.source is not None}
    return CurvePoint(x=x, holds=check.holds, confidence=check.confidence, check=check,
                      agg_tok_s=sum(rates) / len(rates) if rates else None, goodput=goodput(slo, probes),
                      measurements=sum(len(p.levels) for p in probes), source=", ".join(sorted(sources)) or None)


@dataclass(frozen=True)
class CapacityAnswer:
    slo: Slo
    answer: float | None
    """The highest x at which the SLO holds; None: it holds at none."""
    failing: float | None
    """The first x above the answer at which it fails (the bracket's top); None: it held at every x tried."""
    curve: list[CurvePoint] = field(default_factory=list)
    rate: bool = False
    measured: int = 0
    """Levels measured for this answer (re-measures count; levels taken from recordings do not)."""
    maximum: float | None = None

    @property
    def plus_minus(self) -> float | None:
        """Half the bracket: how far the true capacity may be from the middle of it."""
        if self.answer is None or self.failing is None:
            return None
        return (self.failing - self.answer) / 2

    @property
    def at_answer(self) -> CurvePoint | None:
        return next((p for p in self.curve if p.x == self.answer), None)

    @property
    def goodput(self) -> float | None:
        point = self.at_answer
        return point.goodput if point is not None else None

    def fmt_x(self, x: float) -> str:
        """``C=96`` or ``2.5 req/s``."""
        return f"{fmt_figure(x)} req/s" if self.rate else f"C={int(x)}"

    def sentence(self) -> str:
        """The answer in one line, as the cockpit shows it beside the curve."""
        if not self.curve:
            return "nothing measured"
        gp = f" (goodput {fmt_figure(self.goodput)} tok/s)" if self.goodput is not None else ""
        if self.answer is None:
            first = self.curve[0]
            return f"does not hold even at {self.fmt_x(first.x)}: {first.check.reason}"
        if self.failing is None:
            axis = "rate" if self.rate else "C"
            return f"holds at every {axis} tried, up to {self.fmt_x(self.answer)}, at {self.slo.describe()}{gp}"
        pm = self.plus_minus or 0.0
        return f"holds up to {self.fmt_x(self.answer)} ±{fmt_figure(pm)} at {self.slo.describe()}{gp}"

    def to_json(self) -> dict[str, Any]:
        return {"slo": self.slo.text, "slo_described": self.slo.describe(), "axis": "rate" if self.rate else "concurrency",
                "answer": self._x(self.answer), "bracket": [self._x(self.answer), self._x(self.failing)],
                "plus_minus": self.plus_minus, "goodput": _round(self.goodput), "sentence": self.sentence(),
                "holds_at_start": self.answer is not None, "holds_at_max": self.answer is not None and self.failing is None,
                "measured": self.measured, "probes": [p.to_json(self.rate) for p in self.curve]}

    def _x(self, x: float | None) -> float | int | None:
        return None if x is None else (x if self.rate else int(x))


def answer_from_points(slo: Slo, points: Sequence[CurvePoint], *, rate: bool, measured: int,
                       maximum: float | None = None) -> CapacityAnswer:
    """The highest holding x, bracketed by the next x measured above it (the same rule for a search
    and for an ordinary sweep's levels)."""
    curve = sorted(points, key=lambda p: p.x)
    holding = [p.x for p in curve if p.holds]
    answer = max(holding) if holding else None
    above = [p.x for p in curve if answer is not None and p.x > answer]
    failing = min(above) if above else None
    return CapacityAnswer(slo, answer, failing, curve, rate=rate, measured=measured, maximum=maximum)
