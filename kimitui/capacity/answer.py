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
    tpot_p50_s: float | None = None
    """The level's TPOT p50 and TTFT p99 (mean over its measurements): the knee reads them (issue 34)."""
    ttft_p99_s: float | None = None

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
    tpots = [lv.tpot.p50 for p in probes for lv in p.levels if lv.tpot.p50 is not None]
    ttfts = [lv.ttft.p99 for p in probes for lv in p.levels if lv.ttft.p99 is not None]
    return CurvePoint(x=x, holds=check.holds, confidence=check.confidence, check=check,
                      agg_tok_s=sum(rates) / len(rates) if rates else None, goodput=goodput(slo, probes),
                      measurements=sum(len(p.levels) for p in probes), source=", ".join(sorted(sources)) or None,
                      tpot_p50_s=sum(tpots) / len(tpots) if tpots else None,
                      ttft_p99_s=sum(ttfts) / len(ttfts) if ttfts else None)


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
    non_monotonic: tuple[float, ...] = ()
    """Points that broke the rule "holds below, fails above" (a failing point under a holding one):
    the answer is then the highest holding point below the first failure, and the bracket runs to the
    first failure above the highest holding point (see :func:`answer_from_points`)."""
    drive: dict[str, Any] | None = None
    """What the client could drive for this search (:meth:`kimitui.loadgen.drive_budget.DriveCheck.to_json`)."""

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
        if self.non_monotonic:
            return self._non_monotonic_sentence(gp)
        if self.answer is None:
            first = self.curve[0]
            scaled = f" ({self.slo.scale_note()})" if self.slo.scale_note() else ""
            return f"does not hold even at {self.fmt_x(first.x)}: {first.check.reason}{scaled}"
        if self.failing is None:
            axis = "rate" if self.rate else "C"
            scaled = f" ({self.slo.scale_note()})" if self.slo.scale_note() else ""
            return f"holds at every {axis} tried, up to {self.fmt_x(self.answer)}, at {self.slo.describe()}{scaled}{gp}"
        pm = self.plus_minus or 0.0
        scaled = f" ({self.slo.scale_note()})" if self.slo.scale_note() else ""
        return f"holds up to {self.fmt_x(self.answer)} ±{fmt_figure(pm)} at {self.slo.describe()}{scaled}{gp}"

    def _non_monotonic_sentence(self, gp: str) -> str:
        scaled = f" ({self.slo.scale_note()})" if self.slo.scale_note() else ""
        held = (f"holds up to {self.fmt_x(self.answer)}" if self.answer is not None
                else f"does not hold at {self.fmt_x(self.curve[0].x)}")
        low = self.fmt_x(self.answer) if self.answer is not None else "nothing"
        high = f"below {self.fmt_x(self.failing)}" if self.failing is not None else "at or above the highest point tried"
        return (f"{held} at {self.slo.describe()}{scaled}{gp if self.answer is not None else ''}, but the curve is "
                f"not monotonic: {self.monotonic_words()}; the capacity lies between {low} and {high}, no closer")

    def monotonic_words(self) -> str:
        """``fails at C=288 but holds at C=320 (measured again)``."""
        suspects = set(suspect_points(self.curve))
        points = [p for p in self.curve if p.x in suspects]
        fails = [self.fmt_x(p.x) for p in points]
        holds = [self.fmt_x(p.x) for p in self.curve if p.holds and p.x > min(suspects, default=0)]
        twice = all(p.measurements >= 2 for p in points)
        but = f" but holds at {', '.join(holds)}" if holds else " though higher loads measured clearly better"
        return f"fails at {', '.join(fails)}{but}" + (" (measured again)" if twice else "")

    def to_json(self) -> dict[str, Any]:
        return {"slo": self.slo.text, "slo_described": self.slo.describe(), "time_scale": self.slo.time_scale,
                "slo_scaled": self.slo.scale_note() or None, "axis": "rate" if self.rate else "concurrency",
                "answer": self._x(self.answer), "bracket": [self._x(self.answer), self._x(self.failing)],
                "plus_minus": self.plus_minus, "goodput": _round(self.goodput), "sentence": self.sentence(),
                "holds_at_start": self.answer is not None, "holds_at_max": self.answer is not None and self.failing is None,
                "measured": self.measured, "non_monotonic": [self._x(x) for x in self.non_monotonic],
                "client_drive": self.drive, "probes": [p.to_json(self.rate) for p in self.curve]}

    def _x(self, x: float | None) -> float | int | None:
        return None if x is None else (x if self.rate else int(x))


INVERSION_TOLERANCE = 0.2
"""How much better (relative) a higher load must measure, on a term a lower load failed, for the two to be
called non-monotonic: more load never makes a user's figures better, so such a pair is a glitch."""


def answer_from_points(slo: Slo, points: Sequence[CurvePoint], *, rate: bool, measured: int,
                       maximum: float | None = None) -> CapacityAnswer:
    """The highest holding x, bracketed by the next x measured above it (the same rule for a search
    and for an ordinary sweep's levels).  A curve that is not monotonic (:func:`non_monotonic_points`)
    claims no more than its points show: the answer is the highest x that holds below the first failure,
    and the bracket runs to the top of the inversion (or the first failure above it)."""
    curve = sorted(points, key=lambda p: p.x)
    inverted = non_monotonic_points(curve)
    holding = [p.x for p in curve if p.holds]
    if inverted:
        first_fail = min(p.x for p in curve if not p.holds)
        below = [x for x in holding if x < first_fail]
        answer = max(below) if below else None
        suspects = set(suspect_points(curve))
        above = [p.x for p in curve if not p.holds and p.x not in suspects and p.x > max([*holding, *suspects])]
        failing: float | None = min(above) if above else maximum
    else:
        answer = max(holding) if holding else None
        above = [p.x for p in curve if answer is not None and p.x > answer]
        failing = min(above) if above else None
    return CapacityAnswer(slo, answer, failing, curve, rate=rate, measured=measured, maximum=maximum,
                          non_monotonic=inverted)


def non_monotonic_points(curve: Sequence[CurvePoint]) -> tuple[float, ...]:
    """Pairs that break "more load, worse figures": a failing point below a holding one, or below a point
    that measured clearly better (:data:`INVERSION_TOLERANCE`) on a term the lower one failed.  Sorted x."""
    pts = sorted(curve, key=lambda p: p.x)
    out: set[float] = set()
    for i, low in enumerate(pts):
        if low.holds:
            continue
        for high in pts[i + 1:]:
            if high.holds or _clearly_better(low, high):
                out |= {low.x, high.x}
    return tuple(sorted(out))


def suspect_points(curve: Sequence[CurvePoint]) -> tuple[float, ...]:
    """The failing points of an inversion (a holding or clearly better point above them), sorted."""
    pts = sorted(curve, key=lambda p: p.x)
    return tuple(low.x for i, low in enumerate(pts) if not low.holds
                 and any(high.holds or _clearly_better(low, high) for high in pts[i + 1:]))


def _clearly_better(low: CurvePoint, high: CurvePoint) -> bool:
    """Whether ``high`` (more load) measured clearly better than ``low`` on a term ``low`` failed."""
    for a, b in zip(low.check.terms, high.check.terms, strict=False):
        if a.holds or a.value is None or b.value is None:
            continue
        if a.term.op in (">=", ">"):
            if b.value > a.value * (1 + INVERSION_TOLERANCE):
                return True
        elif b.value * (1 + INVERSION_TOLERANCE) < a.value:
            return True
    return False
