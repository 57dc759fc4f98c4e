"""Two rows under the curve whose x axis is time over the current sweep: which level ran when, and what
happened meanwhile (EPLB rebalances, swaps, markers, notes, errors, stragglers' gaps).

A dip on the curve is explained here: the C=1 level's span with a ``≡`` EPLB rebalance and a red
``━`` straggler gap under it.  The layout is :mod:`kimitui.tui.model.timeline_marks`'s; this paints it.
The glyphs' legend is the tooltip (the curve panel's subtitle names the ones on screen).
"""

from __future__ import annotations

from typing import Unpack

from rich.text import Text
from textual import events
from textual.widget import Widget

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.render import clock
from kimitui.tui.model.timeline_marks import Cell, legend, level_row, mark_row
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions


def cells_text(cells: list[Cell]) -> Text:
    """One row of cells as Text, a span per run of one style (not one per cell)."""
    out = Text(no_wrap=True, overflow="crop")
    run, run_style = "", ""
    for ch, style in cells:
        if style != run_style and run:
            out.append(run, run_style or None)
            run = ""
        run, run_style = run + ch, style
    if run:
        out.append(run, run_style or None)
    return out


class TimelineStrip(Widget, ModelView):
    """Height 2; never focused (nothing to do on it but read)."""

    DEFAULT_CSS = "TimelineStrip { height: 2; }"
    can_focus = False
    shows = frozenset({"timeline"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model
        self._rows = Text()
        self.tooltip = Text.from_markup("time over the sweep:  " + legend())

    def redraw(self) -> None:
        tl = self.model.timeline
        width = self.size.width
        win = tl.window()
        if win is None or width <= 0:
            self._rows = Text("timeline: no events yet", "dim")
        else:
            start, end = win
            top = level_row(tl, start, end, width)
            if not tl.levels:  # idle: the window's clock at either end
                left, right = clock(start), f"now {clock(end)}"
                if width >= len(left) + len(right) + 2:
                    top = [(ch, "dim") for ch in left.ljust(width - len(right)) + right]
            self._rows = Text("\n").join([cells_text(top), cells_text(mark_row(tl, start, end, width))])
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        self.redraw()

    def render(self) -> Text:
        return self._rows
