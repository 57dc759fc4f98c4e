"""The bracketing search for the highest load at which an SLO holds.

Pure over ``measure(x) -> Probe`` (a live level, a recorded one, or a synthetic one in tests):
start at ``start``, double until the SLO fails (or ``maximum`` is reached), then bisect between
the last holding and the first failing point until the bracket is within the resolution.  A
point whose bootstrap confidence is in the grey zone is measured again (up to ``repeats``
measurements in all) and judged on the pooled requests, so one lucky or unlucky level does not
decide the answer alone.  A curve that is not monotonic (a failing point below a holding one) has
each point of the inversion measured once more (pooled); if it stays inverted the answer says so and
its bracket is widened (:func:`kimitui.capacity.answer.answer_from_points`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from kimitui.capacity.answer import (CapacityAnswer, CurvePoint, Probe, answer_from_points, point_of,
                                     suspect_points)
from kimitui.capacity.slo import Slo
from kimitui.events import LevelResult, RequestResult

Measure = Callable[[float], Awaitable[Probe]]
GREY_ZONE = (0.2, 0.8)
"""A confidence in here (inclusive) means the point is too close to call on one measurement."""


@dataclass(frozen=True)
class SearchParams:
    start: float = 1
    maximum: float = 1024
    resolution: float | None = None
    """Absolute bracket width to stop at; None: 12.5 % of the holding point (at least 1) for
    concurrency, 10 % for rates."""
    repeats: int = 2
    """Measurements of a grey-zone point in all (1: never re-measure)."""
    rate: bool = False
    """Search over the request rate (req/s) instead of the concurrency."""
    grey: tuple[float, float] = GREY_ZONE

    def __post_init__(self) -> None:
        if self.start <= 0 or self.maximum < self.start:
            raise ValueError(f"start {self.start:g} and max {self.maximum:g}: need 0 < start <= max")
        if self.resolution is not None and self.resolution <= 0:
            raise ValueError(f"resolution {self.resolution:g} must be > 0")
        if self.repeats < 1:
            raise ValueError(f"repeats {self.repeats} must be >= 1")

    def width(self, holding: float) -> float:
        """The bracket width at which the search stops, around the holding point ``holding``."""
        if self.resolution is not None:
            return self.resolution
        return holding * 0.10 if self.rate else max(1.0, holding * 0.125)

    def midpoint(self, lo: float, hi: float) -> float:
        """Between lo and hi: a whole concurrency, a rate to 3 significant figures."""
        if not self.rate:
            return float((int(lo) + int(hi)) // 2)
        mid = (lo + hi) / 2
        digits = 2 - int(math.floor(math.log10(mid)))
        return round(mid, max(0, digits))


@dataclass
class _Search:
    slo: Slo
    measure: Measure
    params: SearchParams
    probes: dict[float, list[Probe]] = field(default_factory=dict)
    points: dict[float, CurvePoint] = field(default_factory=dict)
    n_measured: int = 0
    on_point: Callable[[CurvePoint], None] | None = None

    async def again(self, x: float) -> None:
        """One more measurement of x, judged on every measurement of it pooled."""
        probe = await self.measure(x)
        self.n_measured += probe.source is None
        taken = self.probes.setdefault(x, [])
        taken.append(probe)
        self.points[x] = point = point_of(self.slo, x, taken)
        if self.on_point is not None:
            self.on_point(point)

    async def judge(self, x: float) -> bool:
        """Measure x (again while it is in the grey zone and repeats remain); whether the SLO holds there."""
        grey_lo, grey_hi = self.params.grey
        while True:
            probe = await self.measure(x)
            self.n_measured += probe.source is None
            taken = self.probes.setdefault(x, [])
            taken.append(probe)
            point = point_of(self.slo, x, taken)
            if not (grey_lo <= point.confidence <= grey_hi) or point.measurements >= self.params.repeats:
                break
        self.points[x] = point
        if self.on_point is not None:
            self.on_point(point)
        return point.holds


async def find_capacity(slo: Slo, measure: Measure, params: SearchParams | None = None, *,
                        on_point: Callable[[CurvePoint], None] | None = None) -> CapacityAnswer:
    """The highest x at which ``slo`` holds, bracketed to the resolution (see the module's words)."""
    p = params or SearchParams()
    s = _Search(slo, measure, p, on_point=on_point)
    lo: float | None = None
    hi: float | None = None
    x = float(p.start)
    while True:
        if await s.judge(x):
            lo = x
            if x >= p.maximum:
                break
            x = min(x * 2, float(p.maximum))
        else:
            hi = x
            break
    while lo is not None and hi is not None and hi - lo > p.width(lo):
        mid = p.midpoint(lo, hi)
        if not lo < mid < hi:
            break
        if await s.judge(mid):
            lo = mid
        else:
            hi = mid
    curve = sorted(s.points.values(), key=lambda p: p.x)
    suspects = suspect_points(curve)
    for x in [*suspects, *(p.x for p in curve if p.holds and suspects and p.x > min(suspects))]:
        await s.again(x)  # once: a glitch at one level should not decide; what stays inverted is said
    return answer_from_points(slo, list(s.points.values()), rate=p.rate, measured=s.n_measured,
                              maximum=float(p.maximum))


def capacity_from_levels(levels: Sequence[tuple[LevelResult, Sequence[RequestResult]]], slo: Slo, *,
                         source: str | None = None) -> CapacityAnswer:
    """The capacity an ordinary sweep already shows: the highest measured level at which ``slo`` holds,
    bracketed to the next measured level above it.  Repeats of a level are pooled, as the search does."""
    by_x: dict[float, list[Probe]] = {}
    for level, requests in levels:
        x = float(level.concurrency)
        by_x.setdefault(x, []).append(Probe(x, (level,), list(requests), slo.check(requests, [level]), source))
    points = [point_of(slo, x, probes) for x, probes in sorted(by_x.items())]
    return answer_from_points(slo, points, rate=False, measured=0)
