"""What happened when, on the sweep's time axis: level spans and the marks that explain a dip.

The curve's x axis is C, but the levels run one after another in time, and what
disturbs a level (an EPLB rebalance, a swap, an error, a straggler's silent gap)
is a moment in time.  :class:`Timeline` keeps both, bounded, folded from the same
events as the rest of the cockpit (``CockpitModel`` feeds it; a replay seek
makes a new one), and lays them out on N columns for the 2-row strip under the
curve.  No Textual here: the layout is testable as text.

An EPLB rebalance is logged by every rank (eight ``rebalance start`` lines, eight
``rebalance end time=9.3 s``): one span is kept, from the first start (or end
minus its logged duration) to the first end.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Literal

from kimitui.analysis.eplb import RebalanceTracker
from kimitui.sglang.log import is_kind
from kimitui.events import (
    ErrorEvent, Event, LevelResult, LevelStarted, LogLine, Marker, Note, ProfileSwitch, SwapProgress,
    SweepProgress, SweepResult, SweepStarted,
)

MarkKind = Literal["eplb", "swap", "marker", "note", "error", "straggler"]

MAX_MARKS = 512
"""Marks kept (the oldest go first): far more than a strip's columns can show."""
MAX_LEVELS = 64
IDLE_WINDOW_S = 600.0
"""With no sweep yet the strip shows the last ten minutes."""
TICK_S = 1.0
"""The strip's right edge ("now") moves: redraw it at most this often when nothing else changed."""


@dataclass
class Mark:
    kind: MarkKind
    start: float
    end: float | None = None
    """None: a moment (a marker, a note, an error), or a span still open (an EPLB rebalance)."""
    label: str = ""


@dataclass
class LevelSpan:
    concurrency: int
    start: float
    end: float | None = None
    status: str = "running"


class Timeline:
    """The current sweep's level spans and the session's recent marks, bounded."""

    def __init__(self) -> None:
        self.marks: deque[Mark] = deque(maxlen=MAX_MARKS)
        self.levels: deque[LevelSpan] = deque(maxlen=MAX_LEVELS)
        self.sweep_start: float | None = None
        self.sweep_end: float | None = None
        self.now: float | None = None
        self.rebalances = RebalanceTracker()
        """Every EPLB rebalance seen (the level table counts them per level)."""
        self._eplb_marks: dict[int, Mark] = {}
        self._swap: Mark | None = None
        self._drawn_now: float | None = None

    def add(self, ev: Event) -> bool:
        """Fold one event; True when the strip would look different (a mark, a level, or time moved on)."""
        if self.now is None or ev.t > self.now:
            self.now = ev.t
        changed = self._fold(ev)
        if changed or self._drawn_now is None or self.now - self._drawn_now >= TICK_S:
            self._drawn_now = self.now
            return True
        return False

    def _fold(self, ev: Event) -> bool:
        if isinstance(ev, LogLine):
            return is_kind(ev, "eplb") and self._eplb_line(ev)
        if isinstance(ev, (SweepStarted, LevelStarted, LevelResult, SweepResult, SweepProgress)):
            return self._sweep_event(ev)
        if isinstance(ev, (SwapProgress, ProfileSwitch)):
            return self._swap_event(ev)
        if isinstance(ev, Marker):
            self.marks.append(Mark("marker", ev.t, label=ev.label or "marker"))
        elif isinstance(ev, Note):
            self.marks.append(Mark("note", ev.t, label=ev.text))
        elif isinstance(ev, ErrorEvent) and ev.severity == "error":
            self.marks.append(Mark("error", ev.t, label=f"{ev.source}: {ev.message}"))
        else:
            return False
        return True

    def _eplb_line(self, ev: LogLine) -> bool:
        """Rebalances as :mod:`kimitui.analysis.eplb` folds them (rank copies merged), one span each."""
        rec = self.rebalances.feed(ev)
        if rec is None:
            return False
        mark = self._eplb_marks.get(id(rec))
        if mark is None:
            mark = Mark("eplb", rec.start, label=rec.label)
            self._eplb_marks[id(rec)] = mark
            self.marks.append(mark)
            if len(self._eplb_marks) > MAX_MARKS:
                self._eplb_marks.pop(next(iter(self._eplb_marks)))
        mark.start, mark.end, mark.label = rec.start, rec.end, rec.label
        return True

    def _sweep_event(self, ev: SweepStarted | LevelStarted | LevelResult | SweepResult | SweepProgress) -> bool:
        if isinstance(ev, SweepStarted):
            self.sweep_start, self.sweep_end = ev.t, None
            self.levels.clear()
            return True
        if self.sweep_start is None:
            return False
        if isinstance(ev, SweepResult):
            self.sweep_end = ev.t
            for span in self.levels:
                if span.end is None:
                    span.end, span.status = ev.t, ev.outcome
            return True
        if isinstance(ev, LevelStarted):
            self._close_running(ev.t)
            self.levels.append(LevelSpan(ev.concurrency, ev.t))
            return True
        if isinstance(ev, SweepProgress):
            if not self.levels or self.levels[-1].concurrency != ev.concurrency or self.levels[-1].end is not None:
                self._close_running(ev.t)
                self.levels.append(LevelSpan(ev.concurrency, max(self.sweep_start, ev.t - ev.level_elapsed_s)))
                return True
            return False
        return self._level_done(ev)

    def _close_running(self, t: float) -> None:
        if self.levels and self.levels[-1].end is None:
            self.levels[-1].end = t

    def _level_done(self, ev: LevelResult) -> bool:
        span = next((s for s in reversed(self.levels) if s.concurrency == ev.concurrency and s.end is None), None)
        if span is None:
            floor = max([self.sweep_start or ev.t, *(s.end for s in self.levels if s.end is not None)])
            span = LevelSpan(ev.concurrency, min(ev.t, max(floor, ev.t - ev.wall_s)))
            self.levels.append(span)
        span.end, span.status = ev.t, ev.status
        for s in ev.stragglers:
            if s.gap_start is not None:
                end = s.gap_end if s.gap_end is not None else s.gap_start
                self.marks.append(Mark("straggler", s.gap_start, max(end, s.gap_start),
                                       label=f"straggler C={s.concurrency} gap {s.max_gap_s or end - s.gap_start:.1f} s"))
        return True

    def _swap_event(self, ev: SwapProgress | ProfileSwitch) -> bool:
        if isinstance(ev, SwapProgress):
            if self._swap is not None:
                return False
            self._swap = Mark("swap", ev.t, label=f"swap to {ev.profile}")
            self.marks.append(self._swap)
            return True
        took = ev.phases.get("total", sum(ev.phases.values()))
        start = ev.t - took if math.isfinite(took) else ev.t
        if self._swap is None:
            self._swap = Mark("swap", start)
            self.marks.append(self._swap)
        self._swap.start = min(self._swap.start, start)
        self._swap.end = ev.t
        self._swap.label = f"swap {ev.from_profile or '-'} -> {ev.to_profile} {ev.outcome.replace('_', ' ')}"
        self._swap = None
        return True

    # ------------------------------------------------------------------ layout
    def window(self) -> tuple[float, float] | None:
        """(start, end) of the strip's time axis: the current sweep (to now, or its end), else the last ten minutes."""
        if self.now is None:
            return None
        if self.sweep_start is not None:
            end = self.sweep_end if self.sweep_end is not None else self.now
            return self.sweep_start, max(end, self.sweep_start + 1.0)
        return self.now - IDLE_WINDOW_S, self.now


def column(t: float, start: float, end: float, width: int) -> int:
    """The strip column of time ``t`` (clamped to the strip)."""
    if end <= start or width <= 0:
        return 0
    return min(width - 1, max(0, math.floor((t - start) / (end - start) * width)))


SPANS: frozenset[MarkKind] = frozenset({"eplb", "swap", "straggler"})
"""Kinds that last: an open one (no end yet) runs to now."""

GLYPHS: dict[MarkKind, tuple[str, str, str]] = {
    "swap": ("~", "bold bright_blue", "swap"),
    "eplb": ("≡", "bold magenta", "EPLB rebalance"),
    "note": ("¶", "bold green", "note"),
    "marker": ("▼", "bold cyan", "marker"),
    "error": ("✗", "bold bright_red", "error"),
    "straggler": ("━", "bold red", "straggler gap"),
}
SHORT_NAMES: dict[MarkKind, str] = {"eplb": "EPLB", "straggler": "gap"}
"""kind -> (glyph, style, name), in drawing order: a later kind wins a shared column, but a straggler's
gap over another mark (the rebalance that caused it) keeps that mark's glyph, white on red."""
GAP_BACKGROUND = "red3"

LEVEL_STYLES = {"ok": "on grey23", "running": "black on yellow", "completed": "on grey23"}
NOT_OK_LEVEL_STYLE = "white on dark_red"

Cell = tuple[str, str]
"""(character, style)."""


def mark_end(mark: Mark, now: float) -> float:
    return mark.end if mark.end is not None else (now if mark.kind in SPANS else mark.start)


def legend(kinds: set[MarkKind] | None = None, short: bool = False) -> str:
    """One line naming each glyph (those of ``kinds`` only, when given), as content markup."""
    return ("  " if not short else " ").join(
        f"[{style}]{glyph}[/]{'' if short else ' '}{SHORT_NAMES.get(kind, name) if short else name}"
        for kind, (glyph, style, name) in GLYPHS.items() if kinds is None or kind in kinds)


def level_row(tl: Timeline, start: float, end: float, width: int) -> list[Cell]:
    """Row 1: each level's span, ``│C=64`` (``│64`` where narrow), the running one highlighted."""
    row: list[Cell] = [(" ", "")] * width
    now = tl.now if tl.now is not None else end
    for span in tl.levels:
        c0 = column(span.start, start, end, width)
        c1 = max(c0 + 1, column(span.end if span.end is not None else now, start, end, width))
        style = LEVEL_STYLES.get(span.status, NOT_OK_LEVEL_STYLE)
        label = next((t for t in (f"│C={span.concurrency}", f"│{span.concurrency}", "│") if len(t) <= c1 - c0), "│")
        text = label.ljust(c1 - c0)
        for k, ch in enumerate(text[: width - c0]):
            row[c0 + k] = (ch, style)
    return row


def mark_row(tl: Timeline, start: float, end: float, width: int) -> list[Cell]:
    """Row 2: every mark in the window, its glyph over the columns it lasted (one at least)."""
    row: list[Cell] = [(" ", "")] * width
    now = tl.now if tl.now is not None else end
    order = list(GLYPHS)
    for mark in sorted(tl.marks, key=lambda m: order.index(m.kind)):
        stop = mark_end(mark, now)
        if stop < start or mark.start > end:
            continue
        glyph, style, _ = GLYPHS[mark.kind]
        c0 = column(mark.start, start, end, width)
        c1 = max(c0 + 1, column(stop, start, end, width) + (1 if mark.kind in SPANS else 0))
        for col in range(c0, min(c1, width)):
            if mark.kind == "straggler" and row[col][0] != " ":
                row[col] = (row[col][0], f"bold white on {GAP_BACKGROUND}")  # both stay visible
            else:
                row[col] = (glyph, style)
    return row


def kinds_shown(tl: Timeline) -> set[MarkKind]:
    """The kinds of mark inside the strip's window now (what its legend must name)."""
    win = tl.window()
    if win is None or tl.now is None:
        return set()
    return {m.kind for m in tl.marks if mark_end(m, tl.now) >= win[0] and m.start <= win[1]}
