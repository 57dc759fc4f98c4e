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
from kimitui.report.sweep_summary import LevelRow, SweepRun, count_rebalances


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
    """B over A at each C both measured validly (A is the reference: ``report A --vs B``, ratios B/A)."""
    return speedups(level_results(b), level_results(a))


def algorithm(run: SweepRun) -> str | None:
    """The server's ``speculative_algorithm`` (0.5.23 ``server_args``: DFLASH, EAGLE3, ...) when it named one."""
    algo = (run.knobs or {}).get("speculative_algorithm")
    return str(algo) if isinstance(algo, str) and algo and algo.upper() != "NONE" else None


def _who(a: SweepRun, b: SweepRun) -> tuple[str, str]:
    """(which side speculates, which drafter): ``("B", "DFLASH")``, ``("A: EAGLE3, B", "DFLASH")``..."""
    sides = [(side, run) for side, run in (("A", a), ("B", b)) if has_spec(run)]
    if len(sides) == 1:
        return sides[0][0], algorithm(sides[0][1]) or ""
    algo_a, algo_b = algorithm(a), algorithm(b)
    return f"A{': ' + algo_a if algo_a else ''}, B", algo_b or ""


def _speedup_parts(a: SweepRun, b: SweepRun) -> list[str]:
    """``×1.92 per-user decode at C=1``, ``×1.00 at C=256 (B's peak; aggregate ×1.08)``."""
    ups = run_speedups(a, b)
    if not ups:
        return []
    low = min(ups)
    parts = [f"{format_speedup(ups[low].decode)} per-user decode at C={low}"]
    peak = b.peak
    high = peak[0] if peak is not None and peak[0] in ups else max(ups)
    if high != low:
        where = "B's peak; " if peak is not None and peak[0] == high else ""
        parts.append(f"{format_speedup(ups[high].decode)} at C={high} ({where}aggregate "
                     f"{format_speedup(ups[high].aggregate)})")
    return parts


def speedup_lines(a: SweepRun, b: SweepRun) -> list[str]:
    """The verdict's speculative sentence when either side speculates: the speed-up (B over A) at the lowest C
    both measured and at B's peak, and where acceptance collapsed, e.g. ``speculative decoding (B): DFLASH
    ×2.10 per-user decode at C=1, ×1.00 at C=256 (B's peak; aggregate ×1.05); acceptance collapsed from C=128``."""
    if not (has_spec(a) or has_spec(b)):
        return []
    side, algo = _who(a, b)
    parts = _speedup_parts(a, b)
    if parts and side == "A":  # the ratios are still B over A: say so when B is the plain side
        parts[0] = "B/A " + parts[0]
    segments = [" ".join(filter(None, [algo, ", ".join(parts)]))]
    collapsed = {k: collapsed_levels(run) for k, run in (("A", a), ("B", b))}
    if collapsed["A"] and collapsed["B"]:
        segments.append(f"acceptance collapsed from C={min(collapsed['A'])} (A), C={min(collapsed['B'])} (B)")
    elif collapsed["A"] or collapsed["B"]:
        segments.append(f"acceptance collapsed from C={min(collapsed['A'] or collapsed['B'])}")
    segments = [seg for seg in segments if seg]
    return [f"speculative decoding ({side}): " + "; ".join(segments)] if segments else []


def speedup_rows(a: SweepRun, b: SweepRun) -> list[tuple[int, SpeedUp, float | None, float | None]]:
    """Per C both measured validly: the speed-up (B over A) and each side's accept length, for md and csv."""
    ups = run_speedups(a, b)
    return [(c, ups[c], accept_len(a.levels[c]), accept_len(b.levels[c])) for c in sorted(ups)]


def eplb_line(run: SweepRun, side: str = "") -> str | None:
    """``3 EPLB rebalances, 71 s in all, in the measured levels (B: C=64 ×2, C=128 ×1)``, when a side had any;
    a rebalance that straddles two levels counts in each level's share but once in the total."""
    per_level = [(row.concurrency, run.rebalances_of(row)) for row in run.ordered_levels]
    unique = {id(r): r for _, recs in per_level for r in recs}
    total = count_rebalances(unique.values())
    if not total.count:
        return None
    where = ", ".join(f"C={c} ×{len(recs)}" for c, recs in per_level if recs)
    return (f"{total.count} EPLB rebalance{'s' if total.count != 1 else ''}, {total.total_s:.0f} s in all, "
            f"in the measured levels ({side + ': ' if side else ''}{where})")
