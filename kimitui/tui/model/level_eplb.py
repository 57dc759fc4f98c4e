"""Which levels of the running sweep an EPLB rebalance fell into: the level table's ``EPLB`` cell and the
curve's ``≡`` mark read the same answer.

A level's window is its ``LevelStarted`` .. ``LevelResult`` times (what the cockpit's model keeps in
``SweepView.level_starts``); a recording without the level's start (older ones, or a level that only
reported its result) falls back to the result's time less its wall time.  The counting itself is
:func:`kimitui.analysis.eplb.level_rebalances` (rank copies merged, SGLang's own ``time=``), shared with
``kimitui report``.  No Textual here.
"""

from __future__ import annotations

from kimitui.analysis.eplb import LevelRebalances, Rebalance, level_rebalances
from kimitui.events import LevelResult
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.sweep_view import SweepView


def level_window(sw: SweepView, lv: LevelResult, previous_end: float | None = None) -> tuple[float, float]:
    """(start, end) of a finished level on the session's clock; without its recorded start, the result's time
    less its wall time, but never before ``previous_end`` (the levels run one after another)."""
    start = sw.level_starts.get(lv.concurrency)
    if start is None or start > lv.t:
        start = lv.t - lv.wall_s if lv.wall_s > 0 else lv.t
        if previous_end is not None and previous_end <= lv.t:
            start = max(start, previous_end)
    return max(start, sw.started_t), lv.t


def rebalances_by_level(model: CockpitModel) -> dict[int, LevelRebalances]:
    """C -> the rebalances that overlapped that level (its last repeat), for levels that had at least one."""
    sw = model.sweep
    if sw is None:
        return {}
    records: list[Rebalance] = model.timeline.rebalances.records
    if not any(not r.skipped for r in records):
        return {}
    out: dict[int, LevelRebalances] = {}
    previous_end: float | None = None
    for lv in sorted(sw.levels, key=lambda lv: lv.t):  # the last repeat of a C wins
        found = level_rebalances(records, *level_window(sw, lv, previous_end))
        previous_end = lv.t
        if found.count:
            out[lv.concurrency] = found
        else:
            out.pop(lv.concurrency, None)
    return out
