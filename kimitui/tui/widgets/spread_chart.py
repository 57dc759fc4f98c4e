"""The current level's per-request tok/s: each request a point at (seconds since sent, tok/s).

In-flight requests move right as they progress (yellow), finished ones stay
(green), slow ones and the level's stragglers are red, so a crawling request
stands out while it still crawls.  At high C a progress snapshot lists only the
oldest and slowest requests; the rest come binned (``SweepProgress.cloud``) and
are drawn one point per cell, counted as the requests they stand for.
"""

from __future__ import annotations

from typing import Unpack

from textual_plot import PlotWidget

from kimitui.tui.cockpit_state import CockpitModel, spread_points, weighted_median
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions


class SpreadChart(PlotWidget, ModelView):
    can_focus = False
    shows = frozenset({"spread"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(allow_pan_and_zoom=False, **kwargs)
        self.model = model
        self.summary = ""

    def caption(self) -> tuple[str | None, str | None]:
        return None, self.summary

    def on_mount(self) -> None:
        self.set_xlabel("s since sent")
        self.set_ylabel("tok/s")
        self.margin_top = 0
        self.margin_bottom = 2
        self.margin_left = 6
        self.redraw()

    def redraw(self) -> None:
        self.clear()
        sw = self.model.sweep
        pts = spread_points(sw)
        groups = (
            ("done", [p for p in pts if p.done and not p.slow], "·", "green"),
            ("running", [p for p in pts if not p.done and not p.slow], "•", "yellow"),
            ("slow", [p for p in pts if p.slow], "●", "bold red"),
        )
        for label, group, marker, style in groups:
            if group:
                self.scatter([p.x_s for p in group], [p.tok_s for p in group], marker=marker,
                             marker_style=style, hires_mode=None, label=f"{label} {sum(p.n for p in group)}")
        xmax = max((p.x_s for p in pts), default=10.0)
        ymax = max((p.tok_s for p in pts), default=10.0)
        self.set_xlimits(0, max(1.0, xmax) * 1.05)
        self.set_ylimits(0, max(1.0, ymax) * 1.15)
        self.show_legend(is_visible=False)
        if sw is None or sw.concurrency is None:
            self.summary = "no sweep yet (s starts one)"
        else:
            med = weighted_median(pts)
            low = min((p.tok_s for p in pts), default=None)
            prog = sw.progress
            done = sum(p.n for p in pts if p.done)
            slow = sum(p.n for p in pts if p.slow)
            self.summary = (f"C={sw.concurrency}  [green]· done {done}[/]"
                            + (f"  [yellow]• running {prog.n_in_flight}[/]" if prog and sw.outcome is None else "")
                            + (f"  [b red]● slow {slow}[/]" if slow else "")
                            + (f"  failed {prog.failed}" if prog and prog.failed else "")
                            + (f"  median {med:.1f} min {low:.1f} tok/s" if med is not None and low is not None else ""))

