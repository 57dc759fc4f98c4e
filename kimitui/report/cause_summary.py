"""A sweep's causes, each once: how many stragglers it explains, at which levels, and its worst example.

A report that listed every straggler with its cause and evidence was 2,592 lines for two 8-level sweeps
(issue 29): the same EPLB sentence 128 times.  This folds the attributions (:mod:`kimitui.analysis.causes`,
computed once per sweep in :class:`~kimitui.report.sweep_summary.SweepRun`) into one line per cause; the
worst example's headline is the very sentence the cockpit's detail view and ``--stragglers`` print.
"""

from __future__ import annotations

from dataclasses import dataclass

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.causes.catalogue import label
from kimitui.analysis.causes.words import headline
from kimitui.report.sweep_summary import SweepRun


@dataclass(frozen=True)
class CauseCount:
    """One cause over a sweep: the stragglers it was the main cause of, and the one that lost the most."""

    cause: str
    stragglers: int
    levels: tuple[int, ...]
    lost_s: float
    worst: Attribution


def cause_counts(run: SweepRun) -> list[CauseCount]:
    """Every main cause among the sweep's stragglers, most stragglers first (``unknown`` last)."""
    by: dict[str, list[Attribution]] = {}
    for row in run.ordered_levels:
        for s in row.stragglers:
            a = run.attributions.get(s.request_id)
            if a is not None:
                by.setdefault(a.cause, []).append(a)
    out = [CauseCount(cause, len(attrs), tuple(sorted({a.concurrency for a in attrs})), sum(a.lost_s for a in attrs),
                      max(attrs, key=lambda a: (a.lost_s, a.request_id)))
           for cause, attrs in by.items()]
    return sorted(out, key=lambda c: (c.cause == "unknown", -c.stragglers, c.cause))


def count_of(n: int, total: int) -> str:
    """``3 of 64``: a count is read with what it is out of, never ``3/64``."""
    return f"{n:,} of {total:,}"


def _levels(levels: tuple[int, ...]) -> str:
    if len(levels) == 1:
        return f"C={levels[0]}"
    return f"{len(levels)} levels (C={', '.join(map(str, levels))})"


def cause_line(cc: CauseCount, run: SweepRun) -> str:
    """``EPLB rebalance: 128 of 128 stragglers, at 8 levels (C=1, ...); worst C=1 s2-c1-r23: <its headline>``."""
    what = "no cause found" if cc.cause == "unknown" else label(cc.cause)
    return (f"{what}: {count_of(cc.stragglers, run.n_stragglers)} stragglers, at {_levels(cc.levels)}; "
            f"worst C={cc.worst.concurrency} {cc.worst.request_id}: {headline(cc.worst)}")
