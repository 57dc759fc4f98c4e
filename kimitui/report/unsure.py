"""Why a figure is *unsure*, and what would settle it: the words an operator needs instead of "no change".

An *unsure* verdict is the data saying it cannot tell (:func:`kimitui.report.verdict.judge`).  It is
only useful with its reason — the client distorted the level, one request dominates it, too few
requests were sent, the spread is too wide, or the run-to-run floor alone is wider than the effect —
and with the measurement that would settle it: how many requests per level (the bootstrap's standard
error falls as 1/√n), how many repeats (the floor falls as 1/√repeats), or a lower time scale.

Pure arithmetic over what :mod:`kimitui.report.compare` already computed; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kimitui.events import RequestResult
from kimitui.report.noise import Z95

FEW_REQUESTS = 20
"""Under this many requests a side's noise is itself poorly known: never suggest settling on fewer."""
DOMINANT_SHARE = 0.3
"""Stragglers holding at least this share of a level's request time dominate it (one request: and over 2/n)."""
Z_POWER = 0.84
"""One-sided z for 80 % power: the count that settles it does so four times in five if the effect is as
measured (a count aimed at exactly 1.96 standard errors settles it only half the time)."""
MAX_SCALE = 64.0
"""More than 64x the requests (or repeats) is no plan: say the effect is too close to the margin instead."""


@dataclass(frozen=True)
class Side:
    """One side's evidence at a level: its requests, repeats, noise (log standard errors) and distortion."""

    requests: list[RequestResult]
    n_requests: int
    straggler_ids: frozenset[str]
    se_sample: float | None
    """Standard error from the level's own samples (bootstrap or repeats), before the floor."""
    floor: float
    """The run-to-run floor that more requests cannot lower (already divided by √repeats)."""
    distorted: str | None = None


@dataclass(frozen=True)
class Unsure:
    why: str
    """In words: ``one request holds 67 % of the level's time (B)``."""
    settle: str
    """What would settle it: ``about 40 requests per level``, ``--repeats 4``, ``a lower time scale``."""
    requests: int | None = None
    """Requests per level that would settle it, when more requests can."""
    repeats: int | None = None
    """Repeats of both sweeps that would settle it, when only repeats can."""


def dominant_share(requests: list[RequestResult]) -> float:
    """The largest share of the level's request-seconds held by one request (0 with fewer than 2)."""
    secs = [r.e2e_s for r in requests if r.ok and r.e2e_s is not None and r.e2e_s > 0]
    if len(secs) < 2:
        return 0.0
    return max(secs) / sum(secs)


def straggler_share(requests: list[RequestResult], ids: frozenset[str]) -> tuple[int, float]:
    """(how many of the level's stragglers finished, their share of its request-seconds)."""
    secs = [(r.request_id in ids, r.e2e_s) for r in requests if r.ok and r.e2e_s is not None and r.e2e_s > 0]
    total = sum(s for _, s in secs)
    held = [s for is_straggler, s in secs if is_straggler]
    return len(held), (sum(held) / total if total > 0 else 0.0)


def _dominated(side: Side) -> str:
    """``2 stragglers hold 78 % of the level's time`` when they (or one request) dominate it; else empty."""
    count, share = straggler_share(side.requests, side.straggler_ids)
    if count and share >= DOMINANT_SHARE:
        what = "1 straggler holds" if count == 1 else f"{count} stragglers hold"
        return f"{what} {share * 100:.0f} % of the level's time"
    top = dominant_share(side.requests)
    ok = max(1, len([r for r in side.requests if r.ok]))
    if top >= DOMINANT_SHARE and top >= 2.0 / ok:
        return f"one request holds {top * 100:.0f} % of the level's time"
    return ""


def _target_log(ratio: float, min_effect: float) -> float:
    """The 95 % half-width (in log) that would decide: exclude 1 for a change of ``min_effect`` or more,
    fit inside ±``min_effect`` for a smaller one."""
    lr = math.log(ratio)
    if abs(ratio - 1.0) >= min_effect:
        return abs(lr)
    return math.log(1.0 + min_effect) - lr if lr >= 0 else lr - math.log(1.0 - min_effect)


def _scale_needed(a: Side, b: Side, target_se: float, floors: tuple[float, float]) -> float | None:
    """Smallest k (k times the requests on both sides) bringing the combined SE to ``target_se`` with these
    floors; None if the floors alone are too wide or it would take more than :data:`MAX_SCALE`."""
    fa, fb = floors
    if math.hypot(fa, fb) >= target_se:
        return None
    sa, sb = a.se_sample or 0.0, b.se_sample or 0.0

    def se(k: float) -> float:
        return math.hypot(max(sa / math.sqrt(k), fa), max(sb / math.sqrt(k), fb))

    if se(1.0) <= target_se:
        return 1.0
    if se(MAX_SCALE) > target_se:
        return None
    lo, hi = 1.0, MAX_SCALE
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if se(mid) <= target_se else (mid, hi)
    return hi


MAX_REPEATS = 16


def _plan(a: Side, b: Side, target_se: float, figure_floor: float) -> tuple[float, int] | None:
    """(k times the requests, repeats of both sweeps) that settle it, fewest repeats first (a repeat costs a
    whole sweep; requests cost only the level); None if not even :data:`MAX_REPEATS` would."""
    for r in range(1, MAX_REPEATS + 1):
        floors = (a.floor, b.floor) if r == 1 else (figure_floor / math.sqrt(r),) * 2
        k = _scale_needed(a, b, target_se, floors)
        if k is not None:
            return k, r
    return None


def nice_count(n: float) -> int:
    """Round a request count up to a figure an operator would type (2 significant digits)."""
    n = max(1, math.ceil(n))
    if n <= 20:
        return n
    mag = 10 ** (len(str(n)) - 2)
    return math.ceil(n / mag) * mag


def explain(ratio: float | None, a: Side, b: Side, *, min_effect: float, figure_floor: float,
            level_distorted: bool) -> Unsure:
    """The reason a figure is unsure and the measurement that would settle it, most telling reason first."""
    if level_distorted:
        sides = [s for s, side in (("A", a), ("B", b)) if side.distorted]
        who = f" ({' and '.join(sides)})" if sides else ""
        return Unsure(f"the client distorted this level{who}: it could not keep up with the stream",
                      "sweep it again at a lower time scale (or fewer streams per load process)")
    if ratio is None or ratio <= 0:
        return Unsure("no figure on one side", "")
    n = max(a.n_requests, b.n_requests)
    reasons: list[str] = []
    if a.se_sample is None or b.se_sample is None:
        reasons.append(f"too few requests recorded to measure the noise ({len(a.requests)} and {len(b.requests)})")
    else:
        for label, side in (("A", a), ("B", b)):
            if said := _dominated(side):
                reasons.append(f"{said} ({label}): a straggler dominates it")
        if n < FEW_REQUESTS:
            reasons.append(f"too few requests ({n} per side)")
    target_se = _target_log(ratio, min_effect) / (Z95 + Z_POWER)
    if target_se <= 0:
        return Unsure(f"the change ({(ratio - 1) * 100:+.1f} %) sits on the {min_effect * 100:.0f} % margin itself",
                      "no amount of data will put it clearly on either side; call it a tie")
    if a.se_sample is None or b.se_sample is None:
        want = nice_count(max(FEW_REQUESTS, 4 * n))
        return Unsure("; ".join(reasons), f"about {want} requests per level would settle it", requests=want)
    floor_wide = math.hypot(a.floor, b.floor) >= target_se
    if floor_wide:
        reasons.append(f"run-to-run noise alone (±{Z95 * math.hypot(a.floor, b.floor) * 100:.0f} %) is wider than "
                       f"the {min_effect * 100:.0f} % that matters")
    if not reasons:
        reasons.append("the spread between requests is too wide")
    plan = _plan(a, b, target_se, figure_floor)
    if plan is None and math.sqrt(2.0) * figure_floor / math.sqrt(MAX_REPEATS) < target_se:
        return Unsure("; ".join(reasons), f"more than {nice_count(n * MAX_SCALE)} requests per level would be needed "
                      "to settle it: the effect is small against the spread between requests")
    if plan is None:
        return Unsure("; ".join(reasons), f"more than {MAX_REPEATS} repeats of both sweeps would be needed to settle "
                      f"it at ±{min_effect * 100:.0f} % (this figure spreads ±{figure_floor * 100:.0f} % run to run)")
    k, r = plan
    if k > 1.0 or n < FEW_REQUESTS:
        want = nice_count(max(n * k, FEW_REQUESTS, n + 1))
        if r > 1:
            return Unsure("; ".join(reasons), f"about {want} requests per level and --repeats {r} would settle it",
                          requests=want, repeats=r)
        return Unsure("; ".join(reasons), f"about {want} requests per level would settle it", requests=want)
    return Unsure("; ".join(reasons), f"repeat both sweeps (--repeats {r}) to settle it", repeats=r)
