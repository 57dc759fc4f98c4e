"""The knee of a sweep's throughput-vs-concurrency curve (issue 34): pure, no I/O.

**Definition.** The knee is the concurrency C past which doubling C buys less than :data:`KNEE_GAIN`
(10 %) more output tokens per second while latency keeps rising (TPOT p50 up by :data:`TPOT_RISE`, or
TTFT p99 up by :data:`TTFT_RISE`, per doubling).  Past it an operator pays latency for little throughput.

**How.** The curve is the valid levels' seed-comparable aggregate tok/s (repeats pooled by their mean) on a
log2 C axis.  Between two neighbouring levels the *gain per doubling* is ``(T2/T1) ** (1 / log2(C2/C1)) - 1``,
so levels that do not double (1, 8, 32, 48, 64) are judged on the same footing; it belongs to the segment's
midpoint on log2 C.  The knee is where that gain falls below the threshold for the last time (every later
segment stays below it), found by linear interpolation of the gain on log2 C between the two midpoints
either side: ``C≈96`` lies between measured levels.  "Beyond it" is from the knee to twice its C (or to the
highest level measured, if lower), both ends interpolated (log throughput, log latency, on log2 C).

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
    """The C "beyond it" reaches: twice the knee's, or the highest level measured."""
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
        reach = "" if self.until is None or self.until >= 2 * self.concurrency * 0.999 else f" (to C={self.until:.0f})"
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


def _per_doubling(a: float | None, b: float | None, doublings: float) -> float | None:
    if a is None or b is None or a <= 0 or b <= 0 or doublings <= 0:
        return None
    return (b / a) ** (1.0 / doublings) - 1.0


def _at(points: Sequence[CurvePoint], x: float, attr: str) -> float | None:
    """A figure at log2 C = ``x``, interpolated geometrically between the points either side."""
    xs = [math.log2(p.concurrency) for p in points]
    for i in range(len(points) - 1):
        if xs[i] <= x <= xs[i + 1]:
            a, b = getattr(points[i], attr), getattr(points[i + 1], attr)
            if a is None or b is None or a <= 0 or b <= 0:
                return None
            f = (x - xs[i]) / (xs[i + 1] - xs[i]) if xs[i + 1] > xs[i] else 0.0
            return math.exp(math.log(a) + f * (math.log(b) - math.log(a)))
    return None


def _rise(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or a <= 0 else b / a - 1.0


def find_knee(points: Sequence[CurvePoint], *, min_gain: float = KNEE_GAIN) -> Knee:
    """The knee of the curve (see the module doc for the rule and why)."""
    left_out = tuple(p.why or f"C={p.concurrency} has no throughput" for p in points
                     if not p.usable or not p.tok_s)
    curve = sorted((p for p in points if p.usable and p.tok_s and p.concurrency > 0), key=lambda p: p.concurrency)
    if len(curve) < MIN_LEVELS:
        return Knee("unsure", reason=f"too few levels to see a bend: {len(curve)} usable, need {MIN_LEVELS}",
                    left_out=left_out)
    xs = [math.log2(p.concurrency) for p in curve]
    gains: list[float] = []
    mids: list[float] = []
    for i in range(len(curve) - 1):
        g = _per_doubling(curve[i].tok_s, curve[i + 1].tok_s, xs[i + 1] - xs[i])
        assert g is not None  # usable points have a positive rate
        gains.append(g)
        mids.append((xs[i] + xs[i + 1]) / 2.0)
    last_above = max((i for i, g in enumerate(gains) if g >= min_gain), default=None)
    span = f"C={curve[0].concurrency}–{curve[-1].concurrency}"
    if last_above == len(gains) - 1:
        return Knee("none", reason=f"no knee within the levels measured ({span}): doubling C from "
                                   f"{curve[-2].concurrency} to {curve[-1].concurrency} still bought "
                                   f"{gains[-1] * 100:+.0f} % per doubling", left_out=left_out)
    if last_above is None:  # below the threshold from the first segment on
        x_knee = xs[0]
        how = f"already below {min_gain * 100:.0f} % per doubling from the lowest level, C={curve[0].concurrency}"
    else:
        g0, g1 = gains[last_above], gains[last_above + 1]
        m0, m1 = mids[last_above], mids[last_above + 1]
        x_knee = m0 + (g0 - min_gain) / (g0 - g1) * (m1 - m0) if g0 != g1 else m0
        how = (f"gain per doubling {g0 * 100:+.0f} % around C≈{2 ** m0:.0f}, {g1 * 100:+.0f} % around "
               f"C≈{2 ** m1:.0f}; under {min_gain * 100:.0f} % from C≈{2 ** x_knee:.0f} on")
    x_end = min(x_knee + 1.0, xs[-1])
    tput = _rise(_at(curve, x_knee, "tok_s"), _at(curve, x_end, "tok_s"))
    tpot = _rise(_at(curve, x_knee, "tpot_p50_s"), _at(curve, x_end, "tpot_p50_s"))
    ttft = _rise(_at(curve, x_knee, "ttft_p99_s"), _at(curve, x_end, "ttft_p99_s"))
    if x_end <= x_knee:  # the knee sits on the highest level: the last segment says what lies beyond
        tput = _rise(curve[-2].tok_s, curve[-1].tok_s)
        tpot = _rise(curve[-2].tpot_p50_s, curve[-1].tpot_p50_s)
        ttft = _rise(curve[-2].ttft_p99_s, curve[-1].ttft_p99_s)
    doublings = max(x_end - x_knee, 1e-9) if x_end > x_knee else xs[-1] - xs[-2]
    rising = ((tpot is not None and (1 + tpot) ** (1 / doublings) - 1 >= TPOT_RISE)
              or (ttft is not None and (1 + ttft) ** (1 / doublings) - 1 >= TTFT_RISE))
    c_knee = 2 ** x_knee
    if not rising:
        lat = ", ".join(f"{name} {r * 100:+.0f} %" for name, r in (("TPOT p50", tpot), ("TTFT p99", ttft))
                        if r is not None) or "no latency figures"
        return Knee("unsure", concurrency=c_knee, gain=tput, tpot_rise=tpot, ttft_rise=ttft, until=2 ** x_end,
                    reason=(f"throughput flattens past C≈{c_knee:.0f} but latency does not rise ({lat}): not the "
                            "server saturating; the client or the workload may hold it"), left_out=left_out)
    return Knee("knee", concurrency=c_knee, gain=tput, tpot_rise=tpot, ttft_rise=ttft, until=2 ** x_end,
                reason=how, left_out=left_out)


def knee_of_levels(levels: Iterable[LevelResult], *, min_gain: float = KNEE_GAIN) -> Knee:
    """The knee of a sweep's level results (live: the levels so far)."""
    return find_knee(points_from_levels(levels), min_gain=min_gain)
