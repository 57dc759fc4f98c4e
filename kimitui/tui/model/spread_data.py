"""The running level's per-request decode rates, binned for the spread chart (no Textual, no rich).

At a fixed C every request starts together and decodes at about the same rate, so
"seconds since sent" puts them all on one point.  What the operator asks of this
chart is "how are the requests' rates distributed, and who is slow", so the x axis
is tok/s per request and each column counts the requests whose rate falls in it:
finished ones, in-flight ones (their rate so far) and the slow ones, each its own
layer of one stacked histogram.  A cloud cell of a high-C progress snapshot counts
as the requests it stands for, so 2048 requests are 2048 in the counts.
"""

from __future__ import annotations

import math
from itertools import islice
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kimitui.loadgen.sweep import CLOUD_BINS

if TYPE_CHECKING:
    from kimitui.tui.model.sweep_view import SweepView


@dataclass
class SpreadPoint:
    request_id: str
    x_s: float
    """Seconds since the request was sent (elapsed so far, or e2e when done)."""
    tok_s: float
    done: bool
    slow: bool
    n: int = 1
    """Requests this point stands for: more than one for a cell of a progress snapshot's cloud."""
    span: tuple[float, float] | None = None
    """The tok/s range its requests are drawn over (part of a cloud cell's); None: at ``tok_s`` itself."""


SPREAD_DONE_MAX = 1024
"""Finished requests drawn in the spread (the most recent); more only blurs the cloud and costs CPU."""

SLOW_FRACTION = 0.5
"""Below this fraction of the level's median tok/s a request is drawn red while it runs."""

SLOW_AFTER_S = 2.0
"""An in-flight request younger than this is never called slow: its rate so far is mostly its TTFT."""


def spread_points(sweep: SweepView | None) -> list[SpreadPoint]:
    """Per-request tok/s of the current level: finished ones and the in-flight ones."""
    if sweep is None:
        return []
    marked = {s.request_id for s in sweep.stragglers if s.concurrency == sweep.concurrency}
    pts: list[SpreadPoint] = []
    for r in islice(sweep.results, max(0, len(sweep.results) - SPREAD_DONE_MAX), None):
        rate = r.decode_tok_s if r.decode_tok_s is not None else r.e2e_tok_s
        if r.ok and rate is not None:
            pts.append(SpreadPoint(r.request_id, r.e2e_s or 0.0, rate, True, r.request_id in marked))
    done_ids = {p.request_id for p in pts}
    if sweep.progress is not None and sweep.outcome is None:
        for f in sweep.progress.in_flight:
            if f.request_id in done_ids:
                continue
            rate = f.tok_s if f.tok_s is not None else (f.tokens / f.elapsed_s if f.elapsed_s > 0 else None)
            if rate is not None:
                pts.append(SpreadPoint(f.request_id, f.elapsed_s, rate, False, f.request_id in marked))
        cloud = sweep.progress.cloud
        top = max((rate for _, rate, _ in cloud), default=0.0)
        for k, (elapsed, rate, n) in enumerate(cloud):
            pts.append(SpreadPoint(f"cloud-{k}", elapsed, rate, False, False, n, cloud_span(rate, top)))
    median = weighted_median(pts)
    if median is not None:
        for p in pts:
            if p.tok_s < SLOW_FRACTION * median and (p.done or p.x_s >= SLOW_AFTER_S):
                p.slow = True
    return pts


def cloud_span(rate: float, top: float) -> tuple[float, float] | None:
    """The rates a cloud cell's requests may have: its row of the load process's grid, within half a row of its mean.

    The grid cut ``0..fastest`` into ``CLOUD_BINS[1]`` rows; the fastest binned rate is not sent, the
    top cell's mean stands in for it (it lies in the top row).  Drawn over that range, cells do not
    stack up as a comb of spikes, and a cell is never drawn away from its mean.
    """
    if top <= 0 or rate <= 0:
        return None
    rows = CLOUD_BINS[1]
    row = top / rows
    k = min(rows - 1, int(rate / row))
    return max(k * row, rate - row / 2), min((k + 1) * row, rate + row / 2)


def weighted_median(pts: list[SpreadPoint]) -> float | None:
    """The median tok/s over the requests the points stand for (a cloud cell counts its ``n``)."""
    ordered = sorted(pts, key=lambda p: p.tok_s)
    total = sum(p.n for p in ordered)
    seen = 0
    for p in ordered:
        seen += p.n
        if seen > total // 2:
            return p.tok_s
    return None


def slowest(pts: list[SpreadPoint], k: int) -> tuple[list[SpreadPoint], int]:
    """The ``k`` slowest slow requests that have an id (slowest first), and how many slow ones are binned."""
    named = sorted((p for p in pts if p.slow and p.span is None), key=lambda p: p.tok_s)[:k]
    return named, sum(p.n for p in pts if p.slow and p.span is not None)


def short_id(request_id: str, concurrency: int | None) -> str:
    """``sw-…-c64-r0-17`` -> ``r0-17``: the sweep and the level are on screen already."""
    mark = f"-c{concurrency}-"
    return request_id.split(mark, 1)[1] if mark in request_id else request_id


@dataclass(frozen=True)
class SpreadSummary:
    """The legend line's figures: what the level has done so far, in requests."""

    concurrency: int | None
    live: bool
    """The level is still running (in-flight requests are drawn)."""
    done: int
    running: int
    slow: int
    failed: int
    median: float | None
    low: float | None


def spread_summary(sweep: SweepView | None, pts: list[SpreadPoint]) -> SpreadSummary:
    """The counts the legend shows; ``done``/``failed`` from the snapshot when it knows more than the points."""
    if sweep is None:
        return SpreadSummary(None, False, 0, 0, 0, 0, None, None)
    prog = sweep.progress
    live = prog is not None and sweep.outcome is None
    ok = sum(r.ok for r in sweep.results)
    failed = len(sweep.results) - ok
    if prog is not None:
        ok, failed = max(ok, prog.done), max(failed, prog.failed)  # ``done`` counts the ok ones
    return SpreadSummary(sweep.concurrency, live, ok, prog.n_in_flight if live and prog else 0,
                         sum(p.n for p in pts if p.slow), failed, weighted_median(pts),
                         min((p.tok_s for p in pts), default=None))


LAYERS = ("done_slow", "done", "running_slow", "running")
"""A column's stacked layers, bottom up: the slow ones first, so red sits on the axis where it is seen."""


@dataclass
class SpreadBins:
    """Requests per tok/s column on a shared axis ``0..x_max``, one count list per layer (``LAYERS``)."""

    x_max: float
    step: float
    """Distance between labelled ticks (1, 2 or 5 times a power of ten)."""
    counts: dict[str, list[int]]

    @property
    def columns(self) -> int:
        return len(self.counts["done"])

    def column_of(self, tok_s: float) -> int:
        return max(0, min(self.columns - 1, int(tok_s * (self.columns / self.x_max))))

    def stack(self, column: int) -> list[int]:
        """The column's counts bottom up, in ``LAYERS`` order."""
        return [self.counts[name][column] for name in LAYERS]

    def total(self, layer: str) -> int:
        return sum(self.counts[layer])

    def tallest(self) -> int:
        return max((sum(self.stack(c)) for c in range(self.columns)), default=0)

    def tick_values(self) -> list[float]:
        """The labelled ticks' values below ``x_max``, from 0 in ``step``s."""
        return [k * self.step for k in range(int(self.x_max / self.step * 0.999) + 1)]


def nice_step(top: float, columns: int, min_gap: int) -> float:
    """The smallest 1/2/5·10^k tick step that keeps labelled ticks ``min_gap`` columns apart."""
    ticks_max = max(1, columns // max(1, min_gap))
    step = 10.0 ** math.floor(math.log10(top / ticks_max)) if top > 0 else 1.0
    for mult in (1, 2, 5, 10, 20):
        if top / (step * mult) <= ticks_max:
            return step * mult
    return step * 50


def bin_points(pts: list[SpreadPoint], columns: int, min_gap: int = 6) -> SpreadBins:
    """Count the points' requests per tok/s column; the axis ends a little past the fastest, on a half step."""
    columns = max(1, columns)
    top = max((p.tok_s for p in pts if math.isfinite(p.tok_s)), default=0.0) or 1.0
    step = nice_step(top * 1.05, columns, min_gap)
    half = step / 2
    x_max = math.ceil(top * 1.05 / half) * half
    bins = SpreadBins(x_max, step, {name: [0] * columns for name in LAYERS})
    per = columns / x_max
    last = columns - 1
    for p in pts:
        if not math.isfinite(p.tok_s):
            continue
        layer = ("done" if p.done else "running") if not p.slow else ("done_slow" if p.done else "running_slow")
        counts = bins.counts[layer]
        if p.span is None or p.n == 1:
            counts[max(0, min(last, int(p.tok_s * per)))] += p.n  # column_of, inlined: 1000s of points
            continue
        first = max(0, min(last, int(p.span[0] * per)))
        span = max(0, min(last, int(p.span[1] * per))) - first + 1
        for j in range(span):  # a cloud cell's requests spread evenly over its rates (``cloud_span``)
            counts[first + j] += (j + 1) * p.n // span - j * p.n // span
    return bins
