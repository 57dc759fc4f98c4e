"""EPLB rebalances from the server's log: one record per rebalance, whatever the number of ranks.

SGLang 0.5.23 (``eplb/eplb_manager.py`` ``rebalance``) logs on every rank: ``[EPLBManager] rebalance
start``, then either ``[EPLBManager] rebalance end time=X.XXXs`` or, when the recent balance is
already above ``eplb_min_rebalancing_utilization_threshold``, ``[EPLBManager] Skipped ep rebalancing:
current GPU utilization X > minimum rebalance threshold Y`` (``_check_rebalance_needed``) and no end.
:class:`RebalanceTracker` folds those :class:`~kimitui.events.LogLine` events (the recorded ones, so a
replay and an old recording give the same records) into :class:`Rebalance` spans: the first rank's
start (or the end minus its logged time), the first end, SGLang's own duration; rank copies merged.
The cockpit's timeline and level table and ``kimitui report`` all count rebalances with it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kimitui.events import LogLine
from kimitui.sglang.log import EplbFields, fields_if

RANK_ECHO_S = 5.0
"""A copy of an end (or a skip) within this of the last one is another rank's copy of the same line."""

_END_TIME = re.compile(r"rebalance end(?: time=(\d+(?:\.\d+)?) ?s)?")


@dataclass
class Rebalance:
    """One EPLB rebalance: a span while decoding stalled, or a skip (a moment, no stall)."""

    start: float
    end: float | None = None
    """None while it runs."""
    duration_s: float | None = None
    """SGLang's own ``time=`` figure."""
    skipped: bool = False
    utilization: float | None = None
    threshold: float | None = None

    @property
    def label(self) -> str:
        if self.skipped:
            return (f"EPLB rebalance skipped (balance {self.utilization:.2f} > {self.threshold:.2f})"
                    if self.utilization is not None and self.threshold is not None else "EPLB rebalance skipped")
        if self.duration_s is None:
            return "EPLB rebalance"
        return f"EPLB rebalance {self.duration_s:.1f} s" if self.duration_s >= 1 else f"EPLB rebalance {self.duration_s:.2f} s"


def _phase(line: LogLine, fields: EplbFields) -> str | None:
    phase = fields.get("phase")
    if phase is None:  # a line the parser did not see (a hand-made event): its text says it
        raw = line.raw
        phase = ("start" if "rebalance start" in raw else "end" if "rebalance end" in raw
                 else "skipped" if "Skipped ep rebalancing" in raw else None)
    return phase if isinstance(phase, str) else None


class RebalanceTracker:
    """Folds EPLB log lines into :class:`Rebalance` records (bounded by the caller: it keeps ``records``)."""

    def __init__(self, keep: int = 512) -> None:
        self.records: list[Rebalance] = []
        self.keep = keep
        self._open: Rebalance | None = None
        self._last_close: float | None = None

    def feed(self, line: LogLine) -> Rebalance | None:
        """One log line; returns the record it opened or closed (None: not EPLB's, or a rank's copy)."""
        fields = fields_if(line, "eplb")
        if fields is None:
            return None
        phase = _phase(line, fields)
        if phase == "start":
            if self._open is not None:
                return None
            return self._add(Rebalance(line.t))
        if phase not in ("end", "skipped"):
            return None
        if self._open is None:
            if self._last_close is not None and line.t - self._last_close <= RANK_ECHO_S:
                return None  # another rank's copy of the end (or skip) already counted
            took = self._took(line, fields) if phase == "end" else None
            self._open = self._add(Rebalance(line.t - took if took is not None else line.t))
        rec = self._open
        rec.end = line.t
        if phase == "end":
            rec.duration_s = self._took(line, fields)
        else:
            rec.skipped = True
            u, th = fields.get("utilization"), fields.get("threshold")
            rec.utilization = float(u) if isinstance(u, (int, float)) else None
            rec.threshold = float(th) if isinstance(th, (int, float)) else None
        self._open, self._last_close = None, line.t
        return rec

    def _add(self, rec: Rebalance) -> Rebalance:
        self._open = rec
        self.records.append(rec)
        if len(self.records) > self.keep:
            del self.records[: len(self.records) - self.keep]
        return rec

    @staticmethod
    def _took(line: LogLine, fields: EplbFields) -> float | None:
        took = fields.get("duration_s")
        if took is None and (m := _END_TIME.search(line.raw)) and m.group(1):
            took = float(m.group(1))
        return float(took) if isinstance(took, (int, float)) and math.isfinite(took) else None


def rebalances_in(records: Iterable[Rebalance], start: float, end: float | None) -> list[Rebalance]:
    """The rebalances (not the skips) that overlap ``[start, end]`` (``end`` None: still open)."""
    return [r for r in records if not r.skipped and (end is None or r.start <= end)
            and (r.end is None or r.end >= start)]


@dataclass(frozen=True)
class LevelRebalances:
    """A level's rebalances: how many, and how long decoding stalled in all."""

    count: int
    total_s: float

    @property
    def text(self) -> str:
        """``≡2 41s`` (``≡1 9.3s`` under ten seconds): the level table's cell; empty with none."""
        if not self.count:
            return ""
        return f"≡{self.count} {self.total_s:.1f}s" if self.total_s < 10 else f"≡{self.count} {self.total_s:.0f}s"


def level_rebalances(records: Iterable[Rebalance], start: float, end: float | None) -> LevelRebalances:
    hits = rebalances_in(records, start, end)
    total = sum(r.duration_s if r.duration_s is not None else ((r.end or r.start) - r.start) for r in hits)
    return LevelRebalances(len(hits), total)


def rebalance_period(records: Iterable[Rebalance]) -> float | None:
    """Seconds between the last two scheduled rebalances (a skip is one too: SGLang logs ``rebalance start``
    and then decides), or None before two were seen.

    SGLang 0.5.23 (``eplb/eplb_manager.py`` ``EPLBManager._entrypoint``) rebalances after every
    ``eplb_rebalance_num_iterations`` forward passes; passes only run while requests do, so this is the
    recent pace, not a promise.
    """
    starts = [r.start for r in records]
    return starts[-1] - starts[-2] if len(starts) >= 2 and starts[-1] > starts[-2] else None


def next_rebalance_in(records: Sequence[Rebalance], now: float) -> float | None:
    """Seconds until the next rebalance at the recent pace (0 when it is due), or None without a pace."""
    period = rebalance_period(records)
    if period is None or not records:
        return None
    return max(0.0, records[-1].start + period - now)
