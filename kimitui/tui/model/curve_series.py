"""What the throughput curve draws, as plain data: series, the peak, the axes' ticks.

Kept apart from the widget (no Textual) so the rules an operator relies on are
testable without a terminal: only ``ok`` levels are points of a line or the
peak; a failed, aborted or cut level is a hollow mark at the figure it reached
(or on the floor), never joined in; x ticks sit at exactly the levels swept; a level an EPLB
rebalance fell into carries ``≡`` beside its point (:mod:`kimitui.tui.model.level_eplb`); the knee of
this sweep's curve (:mod:`kimitui.analysis.knee`) is marked at its C with the knee's own one line, and
only a found knee is: "none" and "unsure" draw nothing (the report says why).
The marks, colours and legend that paint it are in :mod:`kimitui.tui.renderables.curve_legend`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.sweep_view import CurvePoint
from kimitui.tui.model.level_eplb import rebalances_by_level

XY = tuple[int, float]
"""(concurrency, tok/s)."""

OVERLAY_STYLES = ("magenta", "dark_orange", "bright_blue", "orchid", "grey58", "gold3")
"""The colour each other profile's run gets, in turn: part of which overlay is which, so it is chosen here."""


@dataclass(frozen=True)
class Hollow:
    """A level that ran but is no measurement: drawn hollow where it got to, never joined in."""

    concurrency: int
    tok_s: float
    status: str


@dataclass
class ProfileSeries:
    """One profile's run: its ``ok`` aggregates (sorted by C) and its not-ok levels."""

    profile: str
    agg: list[XY] = field(default_factory=list)
    steady: list[XY] = field(default_factory=list)
    hollow: list[Hollow] = field(default_factory=list)

    @property
    def levels(self) -> list[int]:
        return sorted({c for c, _ in self.agg} | {c for c, _ in self.steady} | {h.concurrency for h in self.hollow})


def split_points(profile: str, points: Mapping[int, CurvePoint]) -> ProfileSeries:
    """Separate the measured (``ok``) points from the levels that are no point of the curve."""
    series = ProfileSeries(profile)
    for c in sorted(points):
        p = points[c]
        if p.status != "ok":
            series.hollow.append(Hollow(c, p.agg_tok_s or 0.0, p.status))
            continue
        if p.agg_tok_s is not None and math.isfinite(p.agg_tok_s):
            series.agg.append((c, p.agg_tok_s))
        if p.steady_tok_s is not None and math.isfinite(p.steady_tok_s):
            series.steady.append((c, p.steady_tok_s))
    return series


def peak_point(points: Mapping[int, CurvePoint]) -> XY | None:
    """The best seed-comparable aggregate over ``ok`` levels: a failed, aborted or cut level never is."""
    best = [(p.agg_tok_s, c) for c, p in points.items()
            if p.status == "ok" and p.agg_tok_s is not None and math.isfinite(p.agg_tok_s)]
    if not best:
        return None
    y, c = max(best)
    return c, y


@dataclass
class CurveFigure:
    """Everything the curve shows for one model state."""

    current: ProfileSeries | None
    overlays: list[tuple[str, ProfileSeries]]
    """(style, series) of other profiles' last runs."""
    live: XY | None
    levels: list[int]
    ymax: float
    eplb: list[XY] = field(default_factory=list)
    """(C, the point's tok/s) of this run's levels that had an EPLB rebalance: marked ``≡`` beside the point."""
    knee: tuple[float, float] | None = None
    """(C at the knee, the current curve's tok/s there): where the vertical knee marker stands; None: no knee."""
    knee_note: str = ""
    """The knee's one line (``knee at C≈96: beyond it +6 % tokens for +38 % TPOT``); empty with no knee."""
    knee_label: str = ""
    """The marker's short label (``knee C≈96``) where the one line has no room."""


def curve_figure(model: CockpitModel) -> CurveFigure:
    sw = model.sweep
    key = (sw.profile or "?") if sw is not None else None
    overlays: list[tuple[str, ProfileSeries]] = []
    levels: set[int] = set(sw.spec.levels) if sw is not None else set()
    k = 0
    for profile, points in model.curves.items():
        if profile == key or not points:
            continue
        series = split_points(profile, points)
        overlays.append((OVERLAY_STYLES[k % len(OVERLAY_STYLES)], series))
        k += 1
        levels |= set(series.levels)
    current = split_points(key, model.curves.get(key, {})) if key is not None else None
    if current is not None:
        levels |= set(current.levels)
    live = sw.live_point if sw is not None else None
    if live is not None:
        levels.add(live[0])
    ys = [y for _, s in overlays for y in _figures(s)]
    ys += _figures(current) if current is not None else []
    ys += [live[1]] if live is not None else []
    finite = [y for y in ys if math.isfinite(y)]
    fig = CurveFigure(current, overlays, live, sorted(c for c in levels if c > 0), max([10.0, *finite]),
                      eplb_points(current, rebalances_by_level(model)) if current is not None else [])
    if sw is not None and current is not None:
        knee = sw.knee
        y = curve_at(current.agg, knee.concurrency) if knee.status == "knee" and knee.concurrency else None
        if knee.concurrency is not None and y is not None:
            fig.knee, fig.knee_note, fig.knee_label = (knee.concurrency, y), knee.line(), f"knee C≈{knee.c_text}"
    return fig


def curve_at(points: Sequence[XY], c: float) -> float | None:
    """The drawn aggregate line's tok/s at a C between two of its points (geometric on log2 C, as the knee
    is found); None outside the line."""
    for (c0, y0), (c1, y1) in zip(points, points[1:]):
        if c0 <= c <= c1:
            if y0 <= 0 or y1 <= 0 or c1 == c0:
                return y0 + (y1 - y0) * (0.0 if c1 == c0 else (c - c0) / (c1 - c0))
            f = (math.log2(c) - math.log2(c0)) / (math.log2(c1) - math.log2(c0))
            return math.exp(math.log(y0) + f * (math.log(y1) - math.log(y0)))
    return next((y for c0, y in points if c0 == c), None)


def eplb_points(series: ProfileSeries, rebalanced: Mapping[int, object]) -> list[XY]:
    """Where the ``≡`` marks go: each rebalanced level's point (its aggregate, or where a not-ok level got to)."""
    at = {c: y for c, y in series.agg} | {h.concurrency: h.tok_s for h in series.hollow}
    return [(c, at[c]) for c in sorted(rebalanced) if c in at and math.isfinite(at[c])]


def _figures(s: ProfileSeries) -> list[float]:
    return [y for _, y in s.agg] + [y for _, y in s.steady] + [h.tok_s for h in s.hollow]


# ---------------------------------------------------------------------------- axes


def x_limits(levels: Sequence[int]) -> tuple[float, float]:
    """log2(C) with a little room either side so the end markers are not on the frame."""
    if not levels:
        return -0.3, 8.3
    lo, hi = math.log2(min(levels)), math.log2(max(levels))
    pad = max(0.3, (hi - lo) * 0.04)
    return lo - pad, hi + pad


def tick_column(x: float, xmin: float, xmax: float, plot_width: int) -> int:
    """The plot canvas column of data x (as textual_plot maps it: a frame cell each side)."""
    return math.floor(1 + (x - xmin) * (plot_width - 2) / (xmax - xmin))


def level_ticks(levels: Sequence[int], xmin: float, xmax: float, plot_width: int) -> list[tuple[float, str]]:
    """A tick at every level, labelled with C where the label fits (the first and last always)."""
    ticks = [(math.log2(c), str(c)) for c in sorted(set(levels))]
    if not ticks:
        return []
    spans = []
    for x, label in ticks:
        col = tick_column(x, xmin, xmax, plot_width)
        left = col - len(label) // 2 + (1 - len(label) % 2)  # how the canvas centres text
        spans.append((left, left + len(label)))
    keep = [False] * len(ticks)
    keep[-1] = True
    right_edge = -10
    for i, (left, right) in enumerate(spans[:-1]):
        if left > right_edge and right < spans[-1][0]:
            keep[i], right_edge = True, right
    return [(x, label if kept else "") for (x, label), kept in zip(ticks, keep)]


def nice_y_ticks(ymax: float, rows: int) -> list[float]:
    """0 and round steps up to ``ymax``: 2 ticks on a small plot, about one per three rows above (max 6),
    so the rows between ticks stay near-even."""
    most = max(2, min(6, (rows + 2) // 3 + 1))
    raw = ymax / max(most - 1, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * mag for m in (0.5, 1, 2, 2.5, 5, 10) if int(ymax // (m * mag)) + 1 <= most)
    return [k * step for k in range(int(ymax // step) + 1)]


def short_tok(y: float) -> str:
    """A y tick label in at most 5 characters: 850, 1.5k, 12k."""
    if y < 1000:
        return f"{y:.0f}"
    k = y / 1000
    return f"{k:.1f}".rstrip("0").rstrip(".") + "k" if k < 10 else f"{k:.0f}k"


def dotted(points: Sequence[XY], xmin: float, xmax: float, ymax: float, cols: int, rows: int) -> tuple[list[float], list[float]]:
    """Sample points (log2 C, y) every ~1.5 cells along the polyline: drawn as dots, it reads as a dotted line."""
    xs: list[float] = []
    ys: list[float] = []
    for (c0, y0), (c1, y1) in zip(points, points[1:]):
        x0, x1 = math.log2(c0), math.log2(c1)
        dx = (x1 - x0) / max(xmax - xmin, 1e-9) * cols
        dy = (y1 - y0) / max(ymax, 1e-9) * rows * 2  # a cell is about twice as tall as wide
        n = max(2, int(math.hypot(dx, dy) / 1.5))
        for k in range(n):
            f = k / n
            xs.append(x0 + f * (x1 - x0))
            ys.append(y0 + f * (y1 - y0))
    return xs, ys
