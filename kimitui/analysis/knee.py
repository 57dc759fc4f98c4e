"""The knee of a sweep's throughput-vs-concurrency curve (issue 34): pure, no I/O.

**Definition.** The knee is the concurrency C past which doubling C buys less than :data:`KNEE_GAIN`
(10 %) more output tokens per second while latency keeps rising (TPOT p50 up by :data:`TPOT_RISE`, or
TTFT p99 up by :data:`TTFT_RISE`, per doubling).  Past it an operator pays latency for little throughput.

**How.**  The curve is the valid levels' seed-comparable aggregate tok/s T (repeats pooled by their mean),
log-linear between measured levels on a log2 C axis, so levels that do not double (1, 8, 32, 48) read on
the same footing.  What doubling buys from C is ``g(C) = T(2C) / T(C) - 1`` (for C up to half the highest
level); the knee is the C past which ``g`` stays under the threshold: the last point where it crosses it,
found on a 1/64-doubling grid and refined by bisection.  A sharp bend between two levels is found inside
the segment (a plateau from C=256 puts the knee where doubling first buys under 10 %, C≈224, not half way
to the next level).  "Beyond it" runs from the knee to the highest level measured: what the rest of the
measured curve buys, in tokens and in latency.

**Why 10 %.** A doubling of C doubles the requests in flight, the KV cache they hold and, at the same
throughput, each request's wait: buying under a tenth more tokens for that is past the point of return.
Below 10 % the gain is also within reach of run-to-run noise (a level's aggregate spreads about ±3-4 % on
the simulator, docs/sweeps.md), so a lower threshold would find knees in noise; a higher one (25 %) would
call the still-steep part of a curve the knee.

**What it refuses.** Fewer than :data:`MIN_LEVELS` valid levels: *unsure* (a bend needs two segments);
failed, aborted, cut and client-limited levels are left out and named; a flat curve whose latency does not
rise is no saturation knee (the client or the workload holds it: *unsure*, with why); a curve that never
falls below the threshold has *no knee within the levels measured*.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from kimitui.analysis.level_stats import client_limited_throughput, effective_status
from kimitui.events import LevelResult

KNEE_GAIN = 0.10
"""Doubling C past the knee buys less than this share of throughput."""
TPOT_RISE = 0.05
"""...while TPOT p50 rises by at least this much per doubling (a bigger batch per step)..."""
TTFT_RISE = 0.10
"""...or TTFT p99 by at least this much (requests queue)."""
MIN_LEVELS = 3

KneeStatus = Literal["knee", "none", "unsure"]


@dataclass(frozen=True)
class CurvePoint:
    """One concurrency level of the curve: its throughput and the latencies the knee watches."""

    concurrency: int
    tok_s: float | None
    tpot_p50_s: float | None = None
    ttft_p99_s: float | None = None
    usable: bool = True
    """False: failed, aborted, cut or client-limited; left out of the curve (``why`` says which)."""
    why: str = ""


@dataclass(frozen=True)
class Knee:
    """Where the curve bends, or why it cannot be said."""

    status: KneeStatus
    concurrency: float | None = None
    """C at the knee (interpolated on log2 C), when ``status`` is ``knee``."""
    gain: float | None = None
    """Throughput gained beyond the knee (to ``until``), a fraction (0.06 = +6 %)."""
    tpot_rise: float | None = None
    ttft_rise: float | None = None
    until: float | None = None
    """The C "beyond it" reaches: the highest level measured."""
    reason: str = ""
    """Why there is no knee or it is unsure; for a knee, how it was found (the gains either side)."""
    left_out: tuple[str, ...] = field(default_factory=tuple)
    """Levels not on the curve and why (``C=512 failed``)."""

    @property
    def c_text(self) -> str:
        """``96`` (rounded: the C is interpolated)."""
        return "-" if self.concurrency is None else f"{self.concurrency:.0f}"

    def line(self) -> str:
        """``knee at C≈96: beyond it +6 % tokens for +38 % TPOT``; else the reason, in one line."""
        if self.status != "knee" or self.concurrency is None:
            prefix = "no knee" if self.status == "none" else "knee unsure"
            return f"{prefix}: {self.reason}"
        parts = []
        if self.gain is not None:
            parts.append(f"{self.gain * 100:+.0f} % tokens")
        lat = []
        if self.tpot_rise is not None:
            lat.append(f"{self.tpot_rise * 100:+.0f} % TPOT")
        if self.ttft_rise is not None and (self.tpot_rise is None or self.ttft_rise > self.tpot_rise):
            lat.append(f"{self.ttft_rise * 100:+.0f} % TTFT p99")
        beyond = " for ".join([parts[0], " and ".join(lat)] if parts and lat else parts or lat)
        reach = "" if self.until is None else f" (to C={self.until:.0f})"
        return f"knee at C≈{self.c_text}: beyond it {beyond}{reach}" if beyond else f"knee at C≈{self.c_text}"


def points_from_levels(levels: Iterable[LevelResult]) -> list[CurvePoint]:
    """One point per C from level results (repeats pooled by their mean; one bad repeat makes the C unusable)."""
    by_c: dict[int, list[LevelResult]] = {}
    for lv in levels:
        by_c.setdefault(lv.concurrency, []).append(lv)
    out = []
    for c in sorted(by_c):
        reps = by_c[c]
        bad = [effective_status(r) for r in reps if effective_status(r)[0] != "ok"]
        why = f"C={c} {bad[0][0]}" if bad else ""
        if not why and any(client_limited_throughput(r) for r in reps):
            why = f"C={c} client-limited"
        out.append(CurvePoint(c, _mean([r.agg_tok_s for r in reps]), _mean([r.tpot.p50 for r in reps]),
                              _mean([r.ttft.p99 for r in reps]), usable=not why, why=why))
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


GRID = 64
"""Grid points per doubling on which ``g`` is evaluated before the last crossing is bisected."""


class _Curve:
    """The usable points as log-linear functions of log2 C."""

    def __init__(self, points: Sequence[CurvePoint]) -> None:
        self.points = list(points)
        self.xs = [math.log2(p.concurrency) for p in points]

    def at(self, x: float, attr: str) -> float | None:
        """A figure at log2 C = ``x``, interpolated geometrically between the points either side."""
        xs = self.xs
        for i in range(len(xs) - 1):
            if xs[i] <= x <= xs[i + 1]:
                a, b = getattr(self.points[i], attr), getattr(self.points[i + 1], attr)
                if a is None or b is None or a <= 0 or b <= 0:
                    return None
                f = (x - xs[i]) / (xs[i + 1] - xs[i]) if xs[i + 1] > xs[i] else 0.0
                return math.exp(math.log(a) + f * (math.log(b) - math.log(a)))
        return None

    def gain(self, x: float) -> float:
        """What doubling C from 2**x buys in throughput (a fraction)."""
        x = max(self.xs[0], x)
        a, b = self.at(x, "tok_s"), self.at(min(x + 1.0, self.xs[-1]), "tok_s")
        assert a is not None and b is not None  # usable points have a positive rate
        return b / a - 1.0


def _rise(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or a <= 0 else b / a - 1.0


def _last_crossing(curve: _Curve, min_gain: float) -> float | None:
    """The log2 C past which doubling buys under ``min_gain`` for good; None when it never falls under it
    by half the highest level (no knee within the levels)."""
    lo, hi = curve.xs[0], curve.xs[-1] - 1.0
    n = max(1, math.ceil((hi - lo) * GRID))
    grid = [lo + (hi - lo) * k / n for k in range(n + 1)]
    above = [x for x in grid if curve.gain(x) >= min_gain]
    if not above:
        return lo
    last = above[-1]
    if last >= hi:
        return None
    a, b = last, grid[grid.index(last) + 1]
    for _ in range(40):
        mid = (a + b) / 2.0
        a, b = (mid, b) if curve.gain(mid) >= min_gain else (a, mid)
    return (a + b) / 2.0


def find_knee(points: Sequence[CurvePoint], *, min_gain: float = KNEE_GAIN) -> Knee:
    """The knee of the curve (see the module doc for the rule and why)."""
    left_out = tuple(p.why or f"C={p.concurrency} has no throughput" for p in points
                     if not p.usable or not p.tok_s)
    usable = sorted((p for p in points if p.usable and p.tok_s and p.concurrency > 0), key=lambda p: p.concurrency)
    if len(usable) < MIN_LEVELS:
        return Knee("unsure", reason=f"too few levels to see a bend: {len(usable)} usable, need {MIN_LEVELS}",
                    left_out=left_out)
    curve = _Curve(usable)
    first, last = usable[0].concurrency, usable[-1].concurrency
    if curve.xs[-1] - curve.xs[0] < 1.0:
        return Knee("unsure", reason=f"the levels span less than a doubling (C={first}–{last})", left_out=left_out)
    x_knee = _last_crossing(curve, min_gain)
    if x_knee is None:
        top = curve.xs[-1] - 1.0
        return Knee("none", reason=f"no knee within the levels measured (C={first}–{last}): doubling C from "
                                   f"{2 ** top:.0f} to {last} still bought {curve.gain(top) * 100:+.0f} %",
                    left_out=left_out)
    c_knee, x_end = 2 ** x_knee, curve.xs[-1]
    tput = _rise(curve.at(x_knee, "tok_s"), curve.at(x_end, "tok_s"))
    tpot = _rise(curve.at(x_knee, "tpot_p50_s"), curve.at(x_end, "tpot_p50_s"))
    ttft = _rise(curve.at(x_knee, "ttft_p99_s"), curve.at(x_end, "ttft_p99_s"))
    doublings = max(x_end - x_knee, 1e-9)
    rising = ((tpot is not None and (1 + tpot) ** (1 / doublings) - 1 >= TPOT_RISE)
              or (ttft is not None and (1 + ttft) ** (1 / doublings) - 1 >= TTFT_RISE))
    if x_knee <= curve.xs[0]:
        how = f"doubling C buys under {min_gain * 100:.0f} % already from the lowest level, C={first}"
    else:
        before = max(curve.xs[0], x_knee - 1.0)
        how = (f"doubling C buys under {min_gain * 100:.0f} % from C≈{c_knee:.0f} on (from C≈{2 ** before:.0f} "
               f"it bought {curve.gain(before) * 100:+.0f} %)")
    if not rising:
        lat = ", ".join(f"{name} {r * 100:+.0f} %" for name, r in (("TPOT p50", tpot), ("TTFT p99", ttft))
                        if r is not None) or "no latency figures"
        return Knee("unsure", concurrency=c_knee, gain=tput, tpot_rise=tpot, ttft_rise=ttft, until=float(last),
                    reason=(f"throughput flattens past C≈{c_knee:.0f} but latency does not rise ({lat}): not the "
                            "server saturating; the client or the workload may hold it"), left_out=left_out)
    return Knee("knee", concurrency=c_knee, gain=tput, tpot_rise=tpot, ttft_rise=ttft, until=float(last),
                reason=how, left_out=left_out)


def knee_of_levels(levels: Iterable[LevelResult], *, min_gain: float = KNEE_GAIN) -> Knee:
    """The knee of a sweep's level results (live: the levels so far)."""
    return find_knee(points_from_levels(levels), min_gain=min_gain)
