"""Throughput vs concurrency: this run's two aggregates, the moving live point, earlier profiles.

X is log2(C) with ticks labelled by C, so 1..256 spreads evenly.  Solid line =
seed-comparable aggregate (tokens / level wall); dots = steady-state aggregate;
``●`` = the running level so far.  Other profiles' last runs stay as dim lines.
A level that failed, was aborted or cut is no point of any line: a red ``✗`` on
the floor marks where it ran (its figures are not a measurement of the server).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from typing import Unpack

from textual_plot import HiResMode, PlotWidget
from textual_plot.axis_formatter import AxisFormatter
from rich.markup import escape

from kimitui.tui.cockpit_state import CockpitModel
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions

OTHER_STYLES = ("grey58", "magenta", "dark_orange", "cyan", "purple")
NOT_OK_MARK = "✗"
NOT_OK_STYLE = "bold red"


def sweep_status(model: CockpitModel) -> str:
    """The curve panel's subtitle: how far the running sweep is, or how the last one ended."""
    sw = model.sweep
    if sw is None:
        return "press s to sweep"
    if sw.outcome is not None:
        peak = f" peak {sw.outcome.peak_tok_s:.0f} tok/s" if sw.outcome.peak_tok_s is not None else ""
        return f"{sw.profile}: {sw.outcome.outcome}{peak}"
    done = len({lv.concurrency for lv in sw.levels})
    return f"{sw.profile}: C={sw.concurrency} ({done}/{len(sw.spec.levels)} levels done)"


class ConcurrencyAxis(AxisFormatter):
    """Ticks at the powers of two inside the range, labelled with C itself."""

    def get_ticks(self, min_: float, max_: float, max_ticks: int = 8) -> list[float]:
        ticks = [float(k) for k in range(math.floor(min_), math.ceil(max_) + 1) if min_ <= k <= max_]
        step = max(1, math.ceil(len(ticks) / max(max_ticks, 1)))
        return ticks[::step]

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        return [str(round(2 ** t)) for t in ticks]


class SweepCurve(PlotWidget, ModelView):
    """Never takes focus: its zoom/pan keys would shadow the cockpit's keys."""

    can_focus = False
    shows = frozenset({"curve"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(allow_pan_and_zoom=False, **kwargs)
        self.model = model
        self.legend = ""
        """Content markup naming the series; the app shows it in the panel's title.  (The plot's own
        legend widget relayouts the whole screen on every update.)"""

    def caption(self) -> tuple[str | None, str | None]:
        return (f"tok/s vs C  {self.legend}" if self.legend else "Throughput vs concurrency",
                sweep_status(self.model))

    def on_mount(self) -> None:
        self.set_x_formatter(ConcurrencyAxis())
        self.set_xlabel("concurrency")
        self.set_ylabel("tok/s")
        self.margin_top = 0
        self.margin_bottom = 2
        self.margin_left = 7
        self.redraw()

    def redraw(self) -> None:
        m = self.model
        self.clear()
        legend: list[str] = []
        current = m.sweep.profile if m.sweep else None
        ymax = 10.0
        levels: list[int] = []
        not_ok: list[int] = []
        for i, (profile, points) in enumerate(m.curves.items()):
            if profile == (current or "?") or not points:
                continue
            xs = sorted(c for c in points if points[c].status == "ok")
            levels += list(points)
            if not xs:
                continue
            ys = [points[c].agg_tok_s or 0.0 for c in xs]
            ymax = max(ymax, *ys)
            style = OTHER_STYLES[i % len(OTHER_STYLES)]
            self.plot([math.log2(c) for c in xs], ys, line_style=style, hires_mode=HiResMode.BRAILLE)
            legend.append(f"[{style}]━ {escape(profile)}[/]")
        if m.sweep is not None:
            levels += list(m.sweep.spec.levels)
            points = m.curves.get(current or "?", {})
            not_ok = sorted(c for c, p in points.items() if p.status != "ok")
            xs = sorted(c for c in points if points[c].status == "ok")
            agg = [(c, y) for c in xs if (y := points[c].agg_tok_s) is not None]
            steady = [(c, y) for c in xs if (y := points[c].steady_tok_s) is not None]
            if agg:
                ymax = max(ymax, *(y for _, y in agg))
                self.plot([math.log2(c) for c, _ in agg], [y for _, y in agg], line_style="bold green",
                          hires_mode=HiResMode.BRAILLE)
            if steady:
                ymax = max(ymax, *(y for _, y in steady))
                self.scatter([math.log2(c) for c, _ in steady], [y for _, y in steady], marker="·",
                             marker_style="bold cyan")
            if not_ok:
                self.scatter([math.log2(c) for c in not_ok], [0.0] * len(not_ok), marker=NOT_OK_MARK,
                             marker_style=NOT_OK_STYLE)
            live = m.sweep.live_point
            if live is not None:
                ymax = max(ymax, live[1])
                self.scatter([math.log2(live[0])], [live[1]], marker="●", marker_style="bold yellow")
        if m.sweep is not None:
            legend = [f"[b green]━ {escape(current or '?')} agg[/]", "[b cyan]· steady[/]",
                      *(["[b yellow]● now[/]"] if m.sweep.live_point else []),
                      *([f"[{NOT_OK_STYLE}]{NOT_OK_MARK} not ok[/]"] if not_ok else []), *legend]
        self.legend = "  ".join(legend)
        if levels:
            self.set_xlimits(math.log2(max(1, min(levels))) - 0.3, math.log2(max(levels)) + 0.3)
        else:
            self.set_xlimits(-0.3, 8.3)
        self.set_ylimits(0, ymax * 1.1)
