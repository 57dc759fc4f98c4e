"""A sweep's speculative figures and EPLB rebalances, per level, for every report format and the verdict.

The rules are :mod:`kimitui.analysis.spec` (accept length, the collapse rule, speed-ups) and
:mod:`kimitui.analysis.eplb` (rebalances counted in a level's window): the cockpit's level table and
the report say the same.  A sweep without speculative figures or rebalances adds nothing, so an old
recording's report is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from kimitui.analysis.spec import SpeedUp, collapses, format_speedup, level_accept_len, speedups
from kimitui.events import LevelResult
from kimitui.report.sweep_summary import LevelRow, SweepRun


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def level_results(run: SweepRun) -> list[LevelResult]:
    """Each level's last repeat (the analysis functions judge one result per C)."""
    return [row.repeats[-1] for row in run.ordered_levels if row.repeats]


def accept_len(row: LevelRow) -> float | None:
    """The level's accept length (SGLang's token-weighted figure), averaged over its repeats."""
    return _mean([level_accept_len(r) for r in row.repeats])


def accept_rate_p50(row: LevelRow) -> float | None:
    return _mean([r.spec_accept_rate.p50 for r in row.repeats])


def has_spec(run: SweepRun) -> bool:
    return any(accept_len(row) is not None for row in run.ordered_levels)


def has_eplb(run: SweepRun) -> bool:
    return any(run.level_rebalances(row).count for row in run.ordered_levels)


def collapsed_levels(run: SweepRun) -> dict[int, str]:
    """C -> the collapse sentence, for the levels whose acceptance collapsed."""
    return {c.concurrency: c.message for c in collapses(level_results(run))}


def spec_dict(row: LevelRow, collapsed: dict[int, str]) -> dict[str, object] | None:
    acc = accept_len(row)
    if acc is None:
        return None
    return {"accept_len": acc, "accept_len_p50": _mean([r.spec_accept_len.p50 for r in row.repeats]),
            "accept_rate_p50": accept_rate_p50(row), "requests": sum(r.spec_requests for r in row.repeats),
            "collapsed": row.concurrency in collapsed}


def eplb_dict(run: SweepRun, row: LevelRow) -> dict[str, object] | None:
    reb = run.level_rebalances(row)
    return {"rebalances": reb.count, "stall_s": reb.total_s} if reb.count else None


def run_speedups(a: SweepRun, b: SweepRun) -> dict[int, SpeedUp]:
    """B over A at each C both measured validly (A is the reference: ``report A --vs B``)."""
    return speedups(level_results(b), level_results(a))


def speedup_lines(a: SweepRun, b: SweepRun) -> list[str]:
    """The verdict's speculative sentence when either side speculates: the speed-up at the lowest C and at
    B's peak, and B's collapse, e.g. ``speculative (B): ×1.92 per-user decode at C=1, ×1.08 at C=256 (peak);
    acceptance collapsed from C=64``."""
    if not (has_spec(a) or has_spec(b)):
        return []
    ups = run_speedups(a, b)
    side = "B" if has_spec(b) else "A"
    parts: list[str] = []
    if ups:
        low = min(ups)
        parts.append(f"{format_speedup(ups[low].decode)} per-user decode at C={low}")
        peak = b.peak
        high = peak[0] if peak is not None and peak[0] in ups else max(ups)
        if high != low:
            up = ups[high]
            parts.append(f"{format_speedup(up.decode)} decode, {format_speedup(up.aggregate)} aggregate at "
                         f"C={high}" + (" (B's peak)" if peak is not None and peak[0] == high else ""))
    collapsed = collapsed_levels(b if side == "B" else a)
    if collapsed:
        parts.append(f"acceptance collapsed from C={min(collapsed)}")
    return [f"speculative decoding ({side}): " + "; ".join(parts)] if parts else []


def eplb_line(run: SweepRun, side: str) -> str | None:
    """``3 EPLB rebalances, 71 s in all, in the measured levels (B)``, when a side had any."""
    counts = [run.level_rebalances(row) for row in run.ordered_levels]
    n = sum(c.count for c in counts)
    if not n:
        return None
    total = sum(c.total_s for c in counts)
    where = ", ".join(f"C={row.concurrency} ×{c.count}" for row, c in zip(run.ordered_levels, counts) if c.count)
    return f"{n} EPLB rebalance{'s' if n != 1 else ''}, {total:.0f} s in all, in the measured levels ({side}: {where})"
