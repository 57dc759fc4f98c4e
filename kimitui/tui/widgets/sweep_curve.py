"""Throughput vs concurrency: this run's two aggregates, the moving live point, earlier profiles.

X is log2(C) with a tick at exactly each level swept, labelled with C where it
fits; both axes carry their titles.  ``━●`` = seed-comparable aggregate (tokens
/ level wall, what the seeds' script reported), a marker per measured level;
``┈◇`` = steady-state aggregate (dotted, cyan); ``◉ now`` = the running level
so far.  Other profiles' last runs are overlaid, one colour each, named in the
panel title.  A level that failed, was aborted or cut is a hollow ``○`` at the
figure it reached, never joined into a line and never the peak.  ``≡`` beside a
point: an EPLB rebalance stalled decoding during that level (the strip below says when).  ``┊`` from
the floor up to the curve: the knee of this sweep's curve, its one line in the subtitle where it fits,
else written beside the marker where blank cells allow (else a short ``knee C≈96``); no knee, no mark.
What to draw is decided in :mod:`kimitui.tui.model.curve_series`; this only paints it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from typing import Unpack

from rich.markup import escape
from textual import events
from textual_hires_canvas import Canvas, TextAlign
from textual_plot import HiResMode, PlotWidget
from textual_plot.axis_formatter import AxisFormatter

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.curve_series import (
    Hollow, ProfileSeries, curve_figure, dotted, level_ticks, nice_y_ticks, peak_point, short_tok, x_limits,
)
from kimitui.tui.renderables.curve_legend import (
    AGG_MARK, AGG_STYLE, EPLB_MARK, EPLB_STYLE, HOLLOW_MARK, KNEE_MARK, KNEE_STYLE, LIVE_MARK, LIVE_STYLE,
    NOT_OK_STYLES, OVERLAY_MARK, STEADY_MARK, STEADY_STYLE, fit_legend, legend_items, markup_len,
)
from kimitui.tui.model.timeline_marks import kinds_shown, legend as timeline_legend
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions

NOT_OK_MARK = "✗"
"""The compare view's floor mark for a level with no point."""
NOT_OK_STYLE = "bold red"


def sweep_status(model: CockpitModel, width: int | None = None) -> str:
    """The curve panel's subtitle: how far the running sweep is, or how the last one ended, and its peak.

    The peak is the best ``ok`` level's seed-comparable aggregate: a failed, aborted or cut level is
    never the peak, whatever figure it reached (and whatever an old recording's result says).
    Narrower than ``width`` cells it says the same in short."""
    sw = model.sweep
    if sw is None:
        return "press s to sweep"
    best = peak_point(model.curves.get(sw.profile or "?", {}))
    done = len({lv.concurrency for lv in sw.levels})
    where = (sw.outcome.outcome if sw.outcome is not None
             else f"C={sw.concurrency}" if sw.concurrency is not None else "starting")
    # a sweep of a server whose profile kimitui does not know (``sweep --url``) has none to name: not "None:"
    long = (f"{sw.profile}: " if sw.profile else "") + where + (
        "" if sw.outcome else f" ({done}/{len(sw.spec.levels)} levels done)")
    short = f"{where}" + ("" if sw.outcome else f" {done}/{len(sw.spec.levels)}")
    if best is not None:
        long += f"  peak agg {best[1]:.0f} tok/s @C={best[0]}"
        short += f" peak agg {best[1]:.0f}@C={best[0]}"
    if sw.capacity is not None and sw.capacity.curve:
        cap = sw.capacity.sentence()
        if width is None or len(long) + len(cap) + 3 <= width:
            return f"{long} · {cap}"
        if len(short) + len(cap) + 3 <= width:
            return f"{short} · {cap}"
    return long if width is None or len(long) <= width else short


class ConcurrencyAxis(AxisFormatter):
    """Ticks at the powers of two inside the range, labelled with C itself (the compare view's axis)."""

    def get_ticks(self, min_: float, max_: float, max_ticks: int = 8) -> list[float]:
        ticks = [float(k) for k in range(math.floor(min_), math.ceil(max_) + 1) if min_ <= k <= max_]
        step = max(1, math.ceil(len(ticks) / max(max_ticks, 1)))
        return ticks[::step]

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        return [str(round(2 ** t)) for t in ticks]


class LevelAxis(ConcurrencyAxis):
    """A tick at each level swept; the label chosen by ``level_ticks`` (blank where it would collide)."""

    def __init__(self) -> None:
        self.labels: dict[float, str] = {}

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        return [self.labels.get(t, str(round(2 ** t))) for t in ticks]


class TokAxis(AxisFormatter):
    """tok/s ticks in at most five characters (1.5k), so the left margin stays narrow."""

    def get_ticks(self, min_: float, max_: float, max_ticks: int = 8) -> list[float]:
        return nice_y_ticks(max_, 2 * max_ticks)

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        return [short_tok(t) for t in ticks]


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
        self.xaxis = LevelAxis()
        self._live: tuple[float, float] | None = None
        self._eplb: list[tuple[float, float]] = []
        self._knee: tuple[float, float] | None = None
        self._knee_note = ""
        """The knee's one line as of the last redraw ("" with no knee)."""
        self._knee_labels: list[str] = []
        """What the plot may say beside the knee marker, longest first (the one line is left out when the
        subtitle says it)."""

    def _subtitle(self, room: int) -> tuple[str, bool]:
        """The status line, with the knee's one line after it where both fit; and whether it did."""
        status = sweep_status(self.model, room)
        note = self._knee_note  # as of the last redraw: captions are checked every pump, the knee is not
        if note and len(status) + 3 + len(note) <= room:
            return f"{status} · {note}", True
        return status, False

    def caption(self) -> tuple[str | None, str | None]:
        room = self.size.width - 2
        status, _ = self._subtitle(room)
        kinds = kinds_shown(self.model.timeline)
        fits = [m for m in (timeline_legend(kinds), timeline_legend(kinds, short=True))
                if kinds and len(status) + 3 + markup_len(m) <= room]
        status = f"{escape(status)} · {fits[0]}" if fits else escape(status)  # the strip's glyphs, where room
        if not self.legend:
            return "Throughput vs concurrency", status
        return (f"Throughput  {self.legend}" if room >= 60 else self.legend), status

    def on_mount(self) -> None:
        self.set_x_formatter(self.xaxis)
        self.set_y_formatter(TokAxis())
        self.set_ylabel("tok/s")
        self.margin_left = 6
        self.redraw()

    def on_resize(self, event: events.Resize) -> None:
        self.redraw()
        self.refresh(layout=True)

    def _fit_margins(self) -> tuple[int, int]:
        """(plot columns, plot rows inside the frame); below 8 rows the x title moves up beside the y title."""
        w, h = self.size.width, self.size.height
        margins = (1 if h >= 5 else 0, 2 if h >= 8 else 1)
        if margins != (self.margin_top, self.margin_bottom):
            self.margin_top, self.margin_bottom = margins
            self.refresh(layout=True)  # the plot resets its margin canvases only on a layout refresh
        self.set_xlabel("concurrency C (log scale)" if w >= 34 else ("C (log scale)" if w >= 20 else "C"))
        return max(4, w - self.margin_left), max(1, h - self.margin_top - self.margin_bottom - 2)

    def redraw(self) -> None:
        fig = curve_figure(self.model)
        cols, rows = self._fit_margins()
        self.clear()
        xmin, xmax = x_limits(fig.levels)
        ticks = level_ticks(fig.levels, xmin, xmax, cols)
        self.xaxis.labels = dict(ticks)
        self.set_xticks([x for x, _ in ticks])
        ytop = fig.ymax * 1.1
        self.set_yticks(nice_y_ticks(ytop, rows))
        for style, series in fig.overlays:
            self._draw_series(series, style, style, OVERLAY_MARK)
        if fig.current is not None:
            sx, sy = dotted(fig.current.steady, xmin, xmax, ytop, cols, rows)
            if sx:
                self.scatter(sx, sy, marker_style=STEADY_STYLE, hires_mode=HiResMode.BRAILLE)
            self._draw_series(fig.current, AGG_STYLE, STEADY_STYLE, AGG_MARK)
        self._live = (math.log2(fig.live[0]), fig.live[1]) if fig.live is not None else None
        self._eplb = [(math.log2(c), y) for c, y in fig.eplb]
        self._knee = (math.log2(fig.knee[0]), fig.knee[1]) if fig.knee is not None else None
        self._knee_note = fig.knee_note
        in_subtitle = self._subtitle(self.size.width - 2)[1]
        self._knee_labels = [*([] if in_subtitle else [fig.knee_note]), fig.knee_label, "knee"]
        if self._live is not None:
            self.scatter([self._live[0]], [self._live[1]], marker=LIVE_MARK, marker_style=LIVE_STYLE)
        room = self.size.width - 2
        self.legend = fit_legend(legend_items(fig), max(10, room - 12 if room >= 60 else room))
        self.set_xlimits(xmin, xmax)
        self.set_ylimits(0, ytop)

    def _draw_series(self, series: ProfileSeries, line: str, steady: str, mark: str) -> None:
        """Line and a marker per measured level; steady markers (current run only); hollow not-ok levels."""
        if series.agg:
            xs, ys = [math.log2(c) for c, _ in series.agg], [y for _, y in series.agg]
            self.plot(xs, ys, line_style=line, hires_mode=HiResMode.BRAILLE)
        if series.steady and mark == AGG_MARK:
            self.scatter([math.log2(c) for c, _ in series.steady], [y for _, y in series.steady],
                         marker=STEADY_MARK, marker_style=steady)
        if series.agg:
            self.scatter(xs, ys, marker=mark, marker_style=line)
        for status in sorted({h.status for h in series.hollow}):
            marks: list[Hollow] = [h for h in series.hollow if h.status == status]
            style = NOT_OK_STYLES.get(status, "bold red") if mark == AGG_MARK else line
            self.scatter([math.log2(h.concurrency) for h in marks], [h.tok_s for h in marks],
                         marker=HOLLOW_MARK, marker_style=style)

    # textual_plot 0.10.1 (pinned) draws the x title on row 2 of the bottom margin and has no
    # annotations: these two hooks put the title on the margin's last row and label the live point.
    def _render_x_label(self) -> None:
        canvas = self.query_one("#plot", Canvas)
        style = self.get_component_rich_style("plot--label")
        if self.margin_bottom >= 2:
            margin = self.query_one("#margin-bottom", Canvas)
            margin.write_text(canvas.size.width // 2 + self.margin_left, self.margin_bottom - 1,
                              f"[{style}]{self._x_label}", TextAlign.CENTER)
        elif self.margin_top >= 1 and len(self._x_label) + 12 <= self.size.width:  # short: top right
            top = self.query_one("#margin-top", Canvas)
            top.write_text(self.size.width - 2, 0, f"[{style}]x: {self._x_label}", TextAlign.RIGHT)

    def _render_plot(self) -> None:
        super()._render_plot()
        if self._scale_rectangle.width < 4:
            return
        canvas = self.query_one("#plot", Canvas)
        for point in self._eplb:  # beside the level's point: a rebalance stalled decoding in that level
            x, y = self.get_pixel_from_coordinate(*point)
            canvas.write_text(x + 1 if x + 2 < self._scale_rectangle.right else x - 1, y,
                              f"[{EPLB_STYLE}]{EPLB_MARK}")
        self._draw_knee(canvas)
        if self._live is None:
            return
        x, y = self.get_pixel_from_coordinate(*self._live)
        if x + 4 < self._scale_rectangle.right:
            canvas.write_text(x + 1, y, f"[{LIVE_STYLE}]now")
        else:
            canvas.write_text(x - 4, y, f"[{LIVE_STYLE}]now")

    def _draw_knee(self, canvas: Canvas) -> None:
        """``┊`` in the knee's column from the floor up to just under the curve, and beside the column the
        longest label that fits on blank cells, on the highest row it fits (never over a point or a line)."""
        if self._knee is None:
            return
        rect = self._scale_rectangle
        x, y_curve = self.get_pixel_from_coordinate(*self._knee)
        _, y_floor = self.get_pixel_from_coordinate(self._knee[0], 0.0)
        if not rect.x <= x < rect.right:
            return
        for y in range(min(y_floor, rect.bottom - 1), max(y_curve, rect.y), -1):
            if _blank(canvas, x, y):
                canvas.set_pixel(x, y, KNEE_MARK, KNEE_STYLE)
        for label in self._knee_labels:  # the longest label that fits, as high as it fits
            # ending beside the column, else starting beside it; the one line names its C, so it may also
            # start at the plot's left edge
            lefts = (x - len(label), x + 1) + ((rect.x + 1,) if label == self._knee_note else ())
            for row in range(rect.y, rect.bottom):
                for left in lefts:
                    if left >= rect.x and left + len(label) <= rect.right and all(
                            _blank(canvas, c, row) for c in range(left, left + len(label))):
                        canvas.write_text(left, row, f"[{KNEE_STYLE}]{escape(label)}")
                        return


def _blank(canvas: Canvas, x: int, y: int) -> bool:
    """Nothing drawn in that cell yet (a space, or a braille cell with no dot)."""
    try:
        return x >= 0 and y >= 0 and canvas.get_pixel(x, y)[0] in (" ", "\u2800")
    except IndexError:
        return False
