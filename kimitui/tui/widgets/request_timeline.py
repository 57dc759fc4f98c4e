"""A straggler's own timeline: its tokens against seconds since it was sent, the GPUs' utilisation under it.

Both charts share one time axis and the gap is shaded red across both, so "the stream stopped here"
and "the GPUs fell idle here" read as one fact.  Drawn with eighth blocks to whatever size the widget
is given (a few rows at 80x24, more at 200x60); no plot library, no state beyond the evidence.
"""

from __future__ import annotations

import bisect

from rich.text import Text
from textual.widget import Widget

from kimitui.analysis.gap_evidence import GapEvidence, seconds
from kimitui.tui.render import BLOCKS

GAP_BG = "on #451616"
TOKENS = "cyan"
UTIL = "yellow"
TICK_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 1200, 3600)
MIN_TICK_CELLS = 8


def _gap_columns(span: tuple[float, float] | None, total: float, width: int) -> set[int]:
    """Columns whose middle falls in the gap; at least the one nearest it, however short the gap."""
    if span is None:
        return set()
    g0, g1 = span
    cols = {c for c in range(width) if g0 <= (c + 0.5) * total / width <= g1}
    if not cols:
        mid = (g0 + g1) / 2
        cols = {min(width - 1, max(0, int(mid / total * width)))}
    return cols


def _step_at(points: list[tuple[float, float]], t: float, stale: float | None) -> float | None:
    """The value of the last point at or before ``t`` (None before the first, or older than ``stale``)."""
    i = bisect.bisect_right([p[0] for p in points], t) - 1
    if i < 0 or (stale is not None and t - points[i][0] > stale):
        return None
    return points[i][1]


def _area_rows(values: list[float | None], top: float, rows: int) -> list[list[str]]:
    """Each column's value as an eighth-block area ``rows`` high (top row first).  Zero is a value, drawn as the
    lowest eighth; only a column with no reading stays blank."""
    grid = [[" "] * len(values) for _ in range(rows)]
    for c, v in enumerate(values):
        if v is None:
            continue
        level = max(1, round(max(0.0, min(1.0, v / (top or 1.0))) * rows * 8))
        for r in range(rows):
            fill = max(0, min(8, level - (rows - 1 - r) * 8))
            grid[r][c] = BLOCKS[fill]
    return grid


def _axis(total: float, width: int) -> str:
    """Tick labels in seconds since sent at a step that leaves room between them, the unit at the end."""
    step = next((s for s in TICK_STEPS if s / total * width >= MIN_TICK_CELLS), TICK_STEPS[-1])
    cells = [" "] * width
    unit = " s since sent"
    k = 0
    while k * step <= total + 1e-9:
        label = f"{k * step:g}"
        col = min(width - len(label), round(k * step / total * width))
        free = all(ch == " " for ch in cells[max(0, col - 1):col + len(label) + 1])
        if free and col + len(label) <= width - len(unit):
            cells[col:col + len(label)] = label
        k += 1
    if width > len(unit) + 4:
        cells[width - len(unit):] = unit
    return "".join(cells)


def _gap_label(span: tuple[float, float] | None, gap_cols: set[int], width: int) -> str:
    if span is None or not gap_cols:
        return " " * width
    label = f"◀ {seconds(span[1] - span[0])} gap ▶"
    lo, hi = min(gap_cols), max(gap_cols)
    if hi - lo + 1 < len(label):
        label = f"{seconds(span[1] - span[0])} gap"
    start = max(0, min(width - len(label), (lo + hi + 1) // 2 - len(label) // 2))
    return (" " * start + label + " " * width)[:width]


def _row(text: Text, gutter: str, cells: list[str], style: str, gap_cols: set[int]) -> None:
    text.append(gutter, "dim")
    for c, ch in enumerate(cells):
        text.append(ch, f"{style} {GAP_BG}" if c in gap_cols else style)
    text.append("\n")


def draw_timeline(ev: GapEvidence, width: int, height: int) -> Text:
    """The token curve over the GPU utilisation strip, ``width`` x ``height`` cells, the gap shaded."""
    total = ev.axis_end - ev.axis_start
    tokens, util = ev.tokens(), ev.mean_util()
    top = max((n for _, n in tokens), default=0.0)
    gutter_w = max(len(f"{top:.0f}"), 4) + 1
    plot_w = width - gutter_w
    if total <= 0 or plot_w < 12 or height < 4:
        return Text("no timeline to draw here (the window is too small or holds no times)", "dim")
    util_h = max(1, (height - 2) // 3) if tokens else height - 3  # no token curve: one row says so
    tok_h = height - 2 - util_h
    span = ev.gap_span
    gap_cols = _gap_columns(span, total, plot_w)
    text = Text(no_wrap=True, overflow="crop")
    text.append(" " * gutter_w)
    text.append(_gap_label(span, gap_cols, plot_w) + "\n", "bold red")
    if tokens:
        tok_values: list[float | None] = [_step_at(tokens, (c + 1) * total / plot_w, None) for c in range(plot_w)]
        grid = _area_rows(tok_values, top, tok_h)
    else:
        note = "no chunk times kept for this request: no token curve"[:plot_w]
        grid = [list(note.ljust(plot_w))]
    for r, cells in enumerate(grid):
        label = f"{top:.0f}" if r == 0 and tok_h > 1 else ("tok" if r == tok_h - 1 else "")
        _row(text, f"{label:>{gutter_w - 1}}│", cells, TOKENS if tokens else "dim", gap_cols)
    spacing = [b[0] - a[0] for a, b in zip(util, util[1:])]
    stale = max(3.0, 2 * sorted(spacing)[len(spacing) // 2]) if spacing else 3.0
    util_values = [_step_at(util, (c + 0.5) * total / plot_w, stale) for c in range(plot_w)]
    for r, cells in enumerate(_area_rows(util_values, 100.0, util_h)):
        label = "GPU%" if r == 0 else ""
        _row(text, f"{label:>{gutter_w - 1}}│", cells, UTIL, gap_cols)
    text.append(" " * gutter_w + _axis(total, plot_w), "dim")
    return text


def timeline_rows(screen_height: int, has_tokens: bool) -> int:
    """How tall the timeline is drawn: it grows with the screen (6 rows at 24, 18 at 60); a strip of GPU
    utilisation alone (no token curve) stays small."""
    if has_tokens:
        return max(6, min(18, screen_height // 3 - 2))
    return max(5, min(7, screen_height // 8 + 2))


class RequestTimeline(Widget):
    """The drawing above, redrawn to the widget's size on every resize (render reads ``self.size``)."""

    DEFAULT_CSS = """
    RequestTimeline { height: 10; }
    """

    def __init__(self, evidence: GapEvidence, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.evidence = evidence

    def render(self) -> Text:
        return draw_timeline(self.evidence, self.size.width, self.size.height)
