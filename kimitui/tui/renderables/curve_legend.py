"""The throughput curve's marks, colours and legend: the rich side of :mod:`kimitui.tui.model.curve_series`.

The curve widget and the compare view draw with these marks, so the legend and the points agree;
the legend is fitted to the room it gets (full names, else short ones, else the most important).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.markup import escape
from rich.text import Text

from kimitui.tui.model.curve_series import CurveFigure

AGG_STYLE = "bold green"
STEADY_STYLE = "cyan"
LIVE_STYLE = "bold yellow"
NOT_OK_STYLES = {"failed": "bold red", "aborted": "bold yellow", "cut": "bold yellow"}
AGG_MARK, STEADY_MARK, LIVE_MARK, HOLLOW_MARK, OVERLAY_MARK = "●", "◇", "◉", "○", "•"
EPLB_MARK, EPLB_STYLE = "≡", "bold magenta"
"""Beside a level's point when an EPLB rebalance stalled decoding during it (the timeline strip's glyph)."""
KNEE_MARK, KNEE_STYLE = "┊", "bold orange1"
"""The vertical knee marker, from the floor up to the curve at the knee's C, and its label's colour."""


@dataclass(frozen=True)
class LegendItem:
    """One legend entry: its full and short markup; the lower ``rank`` stays longest when room is short."""

    full: str
    short: str
    rank: int


def markup_len(markup: str) -> int:
    return len(Text.from_markup(markup).plain)


def legend_items(fig: CurveFigure) -> list[LegendItem]:
    items: list[LegendItem] = []
    cur = fig.current
    if cur is not None:
        name = escape(cur.profile)
        items.append(LegendItem(f"[{AGG_STYLE}]━{AGG_MARK} {name} agg (seed)[/]", f"[{AGG_STYLE}]━{AGG_MARK} agg[/]", 0))
        items.append(LegendItem(f"[{STEADY_STYLE}]┈{STEADY_MARK} steady[/]", f"[{STEADY_STYLE}]┈{STEADY_MARK} steady[/]", 1))
        if fig.live is not None:
            items.append(LegendItem(f"[{LIVE_STYLE}]{LIVE_MARK} now[/]", f"[{LIVE_STYLE}]{LIVE_MARK} now[/]", 2))
    if any(s.hollow for s in [*(o for _, o in fig.overlays), *([cur] if cur else [])]):
        items.append(LegendItem(f"[bold red]{HOLLOW_MARK} not ok[/]", f"[bold red]{HOLLOW_MARK}[/]", 3))
    if fig.eplb:
        items.append(LegendItem(f"[{EPLB_STYLE}]{EPLB_MARK} rebalance[/]", f"[{EPLB_STYLE}]{EPLB_MARK}[/]", 3))
    for k, (style, series) in enumerate(fig.overlays):
        name = escape(series.profile)
        abbrev = escape(series.profile[:8] + ("…" if len(series.profile) > 8 else ""))
        items.append(LegendItem(f"[{style}]━{OVERLAY_MARK} {name}[/]", f"[{style}]━ {abbrev}[/]", 4 + k))
    return items


def fit_legend(items: Iterable[LegendItem], width: int, sep: str = "  ") -> str:
    """The legend in at most ``width`` cells: full entries, else short ones, else the top-ranked that fit."""
    items = list(items)
    for pick in (lambda i: i.full, lambda i: i.short):
        text = sep.join(pick(i) for i in items)
        if markup_len(text) <= width:
            return text
    chosen: list[LegendItem] = []
    for item in sorted(items, key=lambda i: i.rank):
        trial = sorted([*chosen, item], key=items.index)
        if markup_len(" ".join(i.short for i in trial)) + 3 <= width:
            chosen = trial
    dropped = len(items) - len(chosen)
    return " ".join(i.short for i in chosen) + (f" +{dropped}" if dropped and chosen else "")
