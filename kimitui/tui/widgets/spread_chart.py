"""The running level's per-request decode rates as a stacked histogram (x: tok/s per request, y: requests).

At a fixed C every request starts together and decodes at about the same rate, so
a (seconds since sent, tok/s) scatter put 64 requests on one dot.  What the operator
asks here is "how are the rates spread, and who is slow": each column counts the
requests whose rate falls in it, finished ones solid green, in-flight ones (rate so
far) yellow on top, slow ones and the level's stragglers red at the foot of their
column, and the slow zone (below half the median) red along the axis, so a crawling
request stands out at the left while it still crawls.  The median is a cyan mark.

Drawn by hand from :mod:`kimitui.tui.model.spread_data` into one ``Text`` sized to the
content region: the cost is the cells on screen plus the points (at most
``SPREAD_DONE_MAX`` finished, 16 listed and the binned cloud in flight), never the history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

from rich.text import Text
from textual.widget import Widget

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.sweep_view import SweepView
from kimitui.tui.render import BLOCKS
from kimitui.tui.model.spread_data import (
    LAYERS,
    SLOW_FRACTION,
    SpreadBins,
    SpreadPoint,
    SpreadSummary,
    bin_points,
    short_id,
    slowest,
    spread_points,
    spread_summary,
)
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions

EMPTY = "no sweep yet (s starts one)"
LAYER_STYLE = {"done_slow": "red", "done": "green", "running_slow": "red", "running": "yellow"}
MEDIAN_STYLE = "cyan"


def rate_label(v: float) -> str:
    return f"{v:.0f}" if v >= 10 or v == int(v) else f"{v:g}"


def legend(s: SpreadSummary, width: int) -> Text:
    """C, done, running, slow, failed, median, min: the long words when they fit, then fewer (slow stays longest)."""
    for long, with_min, with_done in ((True, True, True), (False, True, True), (False, False, True),
                                      (False, False, False)):
        out = Text(no_wrap=True, overflow="ellipsis")
        gap = "  " if long else " "
        out.append(f"C={s.concurrency}", "bold")
        if with_done or not s.live:
            out.append(f"{gap}done {s.done}", "green")
        if s.live:
            out.append(f"{gap}{'running' if long else 'run'} {s.running}", "yellow")
        out.append(f"{gap}slow {s.slow}", "bold red" if s.slow else "dim")
        if s.failed or long:
            out.append(f"{gap}{'failed' if long else 'fail'} {s.failed}", "bold red" if s.failed else "dim")
        if s.median is not None:
            out.append(f"{gap}{'median' if long else 'med'} {s.median:.1f}", MEDIAN_STYLE)
        if s.low is not None and with_min:
            out.append(f"{gap}min {s.low:.1f}")
        if long and (s.median is not None or s.low is not None):
            out.append(" tok/s", "dim")
        if out.cell_len <= width:
            return out
    out.truncate(width, overflow="ellipsis")
    return out


LEAST_EIGHTHS = {"done_slow": 2, "done": 1, "running_slow": 2, "running": 1}
"""The least height of a layer with requests: one slow request among thousands is still a red mark."""


def boundaries(stack: list[int], top: int, eighths: int) -> list[int]:
    """Each layer's upper edge in eighths of a cell, cumulative; a layer with requests keeps ``LEAST_EIGHTHS``."""
    out, cum, prev = [], 0, 0
    for name, count in zip(LAYERS, stack):
        cum += count
        edge = round(cum / top * eighths) if top else 0
        if count and edge < prev + LEAST_EIGHTHS[name]:
            edge = prev + LEAST_EIGHTHS[name]
        prev = min(max(edge, prev), eighths)  # never below the layer under it (a bumped layer lifts the rest)
        out.append(prev)
    return out


def cell(edges: list[int], row: int) -> tuple[str, str]:
    """(glyph, style) of the cell ``row`` cells above the axis in a column whose layers end at ``edges``."""
    lo, hi = row * 8, row * 8 + 8
    inside = [(k, max(lo, start), min(hi, end)) for k, (start, end) in enumerate(zip([0, *edges[:-1]], edges))
              if end > lo and start < hi and end > start]
    if not inside:
        return "", ""
    first, _, first_end = inside[0]
    style = LAYER_STYLE[LAYERS[first]]
    if len(inside) == 1:
        return ("█" if first_end >= hi else BLOCKS[first_end - lo]), style
    above = max(inside[1:], key=lambda t: (LAYER_STYLE[LAYERS[t[0]]] == "red", t[2] - t[1]))
    return BLOCKS[first_end - lo], f"{style} on {LAYER_STYLE[LAYERS[above[0]]]}"


@dataclass(frozen=True)
class Frame:
    """Where things go: ``per_bin`` screen cells per histogram bin (2 on a wide panel: bars, not a comb)."""

    bins: SpreadBins
    per_bin: int
    gutter: int
    wide: bool

    @property
    def cells(self) -> int:
        return self.bins.columns * self.per_bin

    def cell_of(self, tok_s: float) -> int:
        return max(0, min(self.cells - 1, int(tok_s / self.bins.x_max * self.cells)))


def plot_rows(f: Frame, rows: int, median_cell: int | None) -> list[Text]:
    """The histogram's rows, top first, each with its y-axis gutter (top count, "requests", half way)."""
    bins = f.bins
    top = max(1, bins.tallest())  # the tallest column fills the plot: its count is the y axis's top label
    edges = [boundaries(bins.stack(c), top, rows * 8) for c in range(bins.columns)]
    labels = {0: f"{top}┤"}
    if rows >= 2:
        labels[1] = ("requests" if f.wide else "req") + "│"
    if rows >= 6 and top % 2 == 0:
        labels[rows // 2] = f"{top // 2}┤"
    out = []
    for y in range(rows):
        row = rows - 1 - y
        runs: list[tuple[str, str]] = [(labels.get(y, "│").rjust(f.gutter), "dim")]
        for x in range(f.cells):
            col = edges[x // f.per_bin]
            if col[-1] <= row * 8:  # above the column's top: the common case, kept cheap
                glyph, style = ("┊", MEDIAN_STYLE) if x == median_cell else (" ", "")
            else:
                glyph, style = cell(col, row)
            runs.append((glyph, style))
        out.append(joined(runs))
    return out


def joined(runs: list[tuple[str, str]]) -> Text:
    """One Text from (glyph, style) runs, neighbours of one style merged (a span per run, not per cell)."""
    line = Text(no_wrap=True)
    text, style = "", ""
    for glyph, st in runs:
        if st != style and text:
            line.append(text, style)
            text = ""
        text, style = text + glyph, st
    if text:
        line.append(text, style)
    return line


def tick_labels(f: Frame, ticks: list[tuple[int, float]]) -> Text:
    """The ticks' values under the axis, then the unit (room for it first: a value without a unit says nothing)."""
    unit = " tok/s per request" if f.wide else " tok/s"
    width = max(0, f.cells - len(unit))
    chars = [" "] * width
    taken = -1
    for x, v in ticks:
        label = rate_label(v)
        start = max(0, x - len(label) // 2)
        if (taken >= 0 and start <= taken) or start + len(label) > width:
            continue
        chars[start:start + len(label)] = label
        taken = start + len(label)
    out = Text(" " * f.gutter + "".join(chars), "dim", no_wrap=True)
    out.append(unit[-f.cells:], "bold")
    return out


def axis_rows(f: Frame, median_cell: int | None, median: float | None) -> list[Text]:
    """The x axis (slow zone red, ticks, median ▲) and its labels, ending in the unit."""
    ticks = [(f.cell_of(v), v) for v in f.bins.tick_values()]
    tick_cells = {x for x, _ in ticks}
    slow_cells = int(SLOW_FRACTION * median / f.bins.x_max * f.cells) if median is not None else 0
    runs = [(" " * (f.gutter - 1) + "└", "dim")]
    for x in range(f.cells):
        if x == median_cell:
            runs.append(("▲", f"bold {MEDIAN_STYLE}"))
        else:
            runs.append(("┬" if x in tick_cells else "─", "red" if x < slow_cells else "dim"))
    return [joined(runs), tick_labels(f, ticks)]


def chart(pts: list[SpreadPoint], s: SpreadSummary, width: int, rows: int) -> list[Text]:
    """The histogram, its axis and labels for ``rows`` plot rows (empty when the panel is too narrow)."""
    wide = width >= 80
    gutter = max(len("requests│" if wide else "req│"), len(str(sum(p.n for p in pts))) + 2)
    cells = width - gutter
    if rows < 1 or cells < 8:
        return []
    per_bin = 2 if cells >= 64 else 1
    gap = len(rate_label(max(p.tok_s for p in pts))) + 3
    f = Frame(bin_points(pts, cells // per_bin, min_gap=-(-gap // per_bin)), per_bin, gutter, wide)
    median_cell = f.cell_of(s.median) if s.median is not None else None
    return plot_rows(f, rows, median_cell) + axis_rows(f, median_cell, s.median)


SLOWEST_FROM_ROWS = 14
"""A panel this tall names the slowest requests under the legend (shorter ones keep the rows for the bars)."""


def slowest_line(pts: list[SpreadPoint], s: SpreadSummary, width: int) -> Text:
    """Who is slow: the slowest requests by id with their rate, or the threshold none is below."""
    out = Text(no_wrap=True, overflow="ellipsis")
    if s.median is None:
        return out
    named, binned = slowest(pts, 8)
    if not named and not binned:
        out.append(f"none slow (below {SLOW_FRACTION * s.median:.1f} tok/s, half the median)", "dim")
        return out
    out.append("slowest ", "bold red")
    for k, p in enumerate(named):
        out.append(("  " if k else "") + f"{short_id(p.request_id, s.concurrency)} ", "red")
        out.append(f"{p.tok_s:.1f}{'' if p.done else ' running'}", "dim" if p.done else "yellow")
    if binned:
        out.append(f"  +{binned} binned", "dim")
    out.truncate(width, overflow="ellipsis")
    return out


def spread_text(sweep: SweepView | None, width: int, height: int) -> Text:
    """The whole chart for a content region ``width`` x ``height``: a legend line, the histogram, the axis."""
    width, height = max(1, width), max(1, height)
    pts = spread_points(sweep)
    s = spread_summary(sweep, pts)
    if sweep is None or s.concurrency is None:
        return centred([Text(EMPTY, "dim")], width, height)
    lines = [legend(s, width)]
    if not pts:
        what = "waiting for the first tokens" if s.live or sweep.outcome is None else "no finished request"
        return centred(lines + [Text(f"C={s.concurrency}: {what}", "dim")], width, height)
    if height >= SLOWEST_FROM_ROWS:
        lines.append(slowest_line(pts, s, width))
    lines += chart(pts, s, width, height - len(lines) - 2)
    out = Text(no_wrap=True, overflow="crop")
    for k, line in enumerate(lines[:height]):
        if k:
            out.append("\n")
        line.truncate(width)
        out.append_text(line)
    return out


def centred(lines: list[Text], width: int, height: int) -> Text:
    """A message in the middle of the panel (no sweep, no rate yet): no empty axes."""
    out = Text(no_wrap=True, overflow="crop")
    pad = max(0, (height - len(lines)) // 2)
    for k in range(min(height, pad + len(lines))):
        if k:
            out.append("\n")
        if k >= pad:
            line = lines[k - pad]
            line.truncate(width)
            out.append(" " * max(0, (width - line.cell_len) // 2))
            out.append_text(line)
    return out


class SpreadChart(Widget, ModelView):
    DEFAULT_CSS = """
    SpreadChart { text-wrap: nowrap; }
    """
    can_focus = False
    shows = frozenset({"spread"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model

    def caption(self) -> tuple[str | None, str | None]:
        return None, ("red: slow (< ½ median) or straggler" if self.model.sweep is not None else "")

    def redraw(self) -> None:
        self.refresh()

    def render(self) -> Text:
        return spread_text(self.model.sweep, self.size.width, self.size.height)
