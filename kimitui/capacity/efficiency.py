"""Beside the capacity answer (issue 34): the knee of the curve the search measured, and the most efficient
load within the SLO (most tokens per kJ of GPU energy, or lowest cost per million tokens).

Pure: the capacity answer's curve points and, per point, the energy figures its levels got from the GPU
samples (:mod:`kimitui.analysis.energy`); the command gathers those.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kimitui.analysis.cost import CostRates, level_cost
from kimitui.analysis.energy import LevelEnergy
from kimitui.analysis.knee import CurvePoint as KneePoint
from kimitui.analysis.knee import Knee, find_knee
from kimitui.capacity.answer import CapacityAnswer

OBJECTIVES = ("capacity", "tokens_per_kj", "cost_per_mtok")
"""``kimitui capacity --objective``: the SLO's capacity alone (default), or also the most efficient point within it."""


def knee_of(answer: CapacityAnswer) -> Knee | None:
    """The knee of the measured curve (concurrency searches only: the rate axis has no C); None on the rate axis."""
    if answer.rate:
        return None
    return find_knee([KneePoint(int(p.x), p.agg_tok_s, p.tpot_p50_s, p.ttft_p99_s) for p in answer.curve])


@dataclass(frozen=True)
class PointEnergy:
    """The energy figures of one curve point: the mean over its measured levels that GPU samples covered."""

    x: float
    j_per_token: float | None
    tokens_per_kj: float | None
    cost_per_mtok: float | None
    reason: str = ""


def point_energy(x: float, levels: Sequence[LevelEnergy], rates: CostRates | None) -> PointEnergy:
    """One point's figures from its levels' energy (every level must have them, else None with why)."""
    if not levels:
        return PointEnergy(x, None, None, None, "no GPU samples (reused from a recording, or no --host)")
    if any(e.j_per_token is None for e in levels):
        why = next((e.reason for e in levels if e.reason), "no energy figures")
        return PointEnergy(x, None, None, None, why)
    j = sum(e.j_per_token or 0.0 for e in levels) / len(levels)
    per_kj = [e.tokens_per_kj for e in levels if e.tokens_per_kj is not None]
    priced = [level_cost(rates, tok_s=e.agg_tok_s, gpus=e.gpus or None, j_per_token=e.j_per_token) for e in levels]
    costs = [c.per_mtok for c in priced if c is not None and c.per_mtok is not None]
    cost = sum(costs) / len(costs) if costs and len(costs) == len(levels) else None
    return PointEnergy(x, j, sum(per_kj) / len(per_kj) if per_kj else None, cost)


@dataclass(frozen=True)
class Efficiency:
    """The most efficient point within the SLO by the objective, or why there is none."""

    objective: str
    x: float | None
    figures: PointEnergy | None
    reason: str = ""

    def line(self, answer: CapacityAnswer, currency: str = "") -> str:
        """``most tokens per kJ within the SLO: C=64, 402 tokens per kJ (2.49 J/token)``, or why not."""
        what = "most tokens per kJ" if self.objective == "tokens_per_kj" else "lowest cost per million tokens"
        if self.x is None or self.figures is None:
            return f"{what} within the SLO: not known ({self.reason})"
        f = self.figures
        figure = (f"{f.tokens_per_kj:,.0f} tokens per kJ ({f.j_per_token:.3g} J/token)"
                  if self.objective == "tokens_per_kj" and f.tokens_per_kj is not None and f.j_per_token is not None
                  else f"{f.cost_per_mtok:,.3g}{' ' + currency if currency else ''} per M tokens"
                  if f.cost_per_mtok is not None else "")
        return f"{what} within the SLO: {answer.fmt_x(self.x)}, {figure}"

    def to_json(self) -> dict[str, Any]:
        f = self.figures
        return {"objective": self.objective, "x": self.x, "reason": self.reason,
                "j_per_token": _r(f.j_per_token if f else None), "tokens_per_kj": _r(f.tokens_per_kj if f else None),
                "cost_per_mtok": _r(f.cost_per_mtok if f else None)}


def _r(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else round(v, 6)


def most_efficient(answer: CapacityAnswer, energy: Mapping[float, PointEnergy], objective: str) -> Efficiency:
    """Among the points where the SLO holds, the one with the most tokens per kJ (``tokens_per_kj``) or the
    lowest cost per M tokens (``cost_per_mtok``)."""
    holding = [p.x for p in answer.curve if p.holds]
    if not holding:
        return Efficiency(objective, None, None, "the SLO holds at no point measured")
    attr = "tokens_per_kj" if objective == "tokens_per_kj" else "cost_per_mtok"
    known = [(e, x) for x in holding if (e := energy.get(x)) is not None and getattr(e, attr) is not None]
    if not known:
        why = next((e.reason for x in holding if (e := energy.get(x)) is not None and e.reason),
                   "no point within the SLO has GPU power samples" if attr == "tokens_per_kj"
                   else "no point within the SLO has a cost ([cost] prices, and GPU samples for kwh)")
        return Efficiency(objective, None, None, why)
    best = (max if objective == "tokens_per_kj" else min)(known, key=lambda ex: getattr(ex[0], attr))
    return Efficiency(objective, best[1], best[0])
