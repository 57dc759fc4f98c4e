"""The throughput curve (issue 15, "The curve: ..."): axis titles, a tick at each level, a marker per
level, steady told apart from the seed-comparable aggregate, the live point, overlays with a legend,
and failed/aborted levels hollow and never the peak.  Drawn in a small app of its own, at the content
sizes the cockpit gives the curve at 80x24, 120x40 and 200x60."""

from __future__ import annotations

import math

import pytest
from textual.app import App, ComposeResult
from textual_hires_canvas import Canvas
from textual_plot.plot_widget import LinePlot, ScatterPlot

from kimitui.analysis.level_stats import peak_level
from kimitui.events import LevelResult, LevelStarted, SweepProgress, SweepResult, SweepStarted
from kimitui.report.sweep_summary import sweeps_of
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.sweep_view import CurvePoint
from kimitui.tui.model.curve_series import curve_figure, level_ticks, nice_y_ticks, peak_point, x_limits
from kimitui.tui.renderables.curve_legend import fit_legend, legend_items, markup_len
from kimitui.tui.widgets.panel import Panel
from kimitui.tui.widgets.sweep_curve import SweepCurve, sweep_status
from tests.support.fakecontrol import T0, level, spec, story_events

CONTENT = {"80x24": (38, 9), "120x40": (58, 18), "200x60": (96, 28)}
"""The curve's content size in the cockpit's layout at each terminal size."""


class CurveApp(App[None]):
    def __init__(self, model: CockpitModel, width: int, height: int) -> None:
        super().__init__()
        self.model, self.w, self.h = model, width, height

    def compose(self) -> ComposeResult:
        panel = Panel(SweepCurve(self.model, id="curve"), id="panel-curve")
        panel.styles.width, panel.styles.height = self.w + 4, self.h + 2  # border + padding
        yield panel


def canvas_text(curve: SweepCurve, cid: str) -> list[str]:
    return ["".join(row) for row in curve.query_one(f"#{cid}", Canvas)._buffer]


async def settle_curve(app: CurveApp, pilot) -> SweepCurve:
    curve = app.query_one(SweepCurve)
    for _ in range(3):
        await pilot.pause(0.05)
        curve.redraw()
    await pilot.pause(0.05)
    return curve


def story_model() -> CockpitModel:
    m = CockpitModel(raise_errors=True)
    m.apply(story_events())
    return m


def scatters(curve: SweepCurve, marker: str) -> list[ScatterPlot]:
    return [d for d in curve._datasets if isinstance(d, ScatterPlot) and d.marker == marker]


@pytest.mark.parametrize("size", list(CONTENT))
async def test_axis_titles_show(size):
    app = CurveApp(story_model(), *CONTENT[size])
    async with app.run_test(size=(CONTENT[size][0] + 10, CONTENT[size][1] + 6)) as pilot:
        curve = await settle_curve(app, pilot)
        assert "tok/s" in canvas_text(curve, "margin-top")[0]
        bottom = "\n".join(canvas_text(curve, "margin-bottom"))
        assert "concurrency C (log scale)" in bottom


async def test_ticks_are_the_levels_swept_each_labelled_with_c():
    app = CurveApp(story_model(), *CONTENT["200x60"])
    async with app.run_test(size=(110, 36)) as pilot:
        curve = await settle_curve(app, pilot)
        levels = [1, 8, 32, 64, 96, 128, 192, 256]
        assert list(curve._x_ticks or []) == [math.log2(c) for c in levels]
        ticks_row = canvas_text(curve, "margin-bottom")[0].split()
        assert ticks_row == [str(c) for c in levels]


def test_tick_labels_never_collide_and_keep_both_ends():
    levels = [1, 2, 4, 8, 16, 32, 64, 96, 128, 192, 256]
    xmin, xmax = x_limits(levels)
    ticks = level_ticks(levels, xmin, xmax, 32)
    assert [x for x, _ in ticks] == [math.log2(c) for c in levels]  # a tick at every level, labelled or not
    labels = [lab for _, lab in ticks]
    assert labels[0] == "1" and labels[-1] == "256" and "" in labels


async def test_a_marker_per_measured_level_on_each_series_and_the_live_point_labelled_now():
    app = CurveApp(story_model(), *CONTENT["120x40"])
    async with app.run_test(size=(70, 26)) as pilot:
        curve = await settle_curve(app, pilot)
        (agg,) = scatters(curve, "●")
        assert list(agg.x) == [0.0, 3.0, 5.0] and list(agg.y) == [38.4, 300.0, 640.0]  # ep8-eplb C=1, 8, 32
        (steady,) = scatters(curve, "◇")
        assert list(steady.y) == [62.1, 352.0, 700.0]
        (tuned,) = scatters(curve, "•")
        assert len(tuned.x) == 8  # the ep8-tuned overlay: every level marked
        (live,) = scatters(curve, "◉")
        assert list(live.x) == [6.0] and list(live.y) == [900.0]  # C=64, 5400 tokens in 6 s
        assert any("◉now" in row for row in canvas_text(curve, "plot"))
        assert "◉ now" in curve.legend


def hollow_model(status: str = "aborted") -> CockpitModel:
    """C=1, 8 ok; C=64 reached a higher aggregate but was aborted; the result claims it as the peak."""
    m = CockpitModel(raise_errors=True)
    m.apply([SweepStarted(t=T0, sweep_id="s", spec=spec([1, 8, 64]), profile="p"),
             level("s", 1, 60.0, 62.0, T0 + 10), level("s", 8, 400.0, 420.0, T0 + 20),
             level("s", 64, 2000.0, 2100.0, T0 + 30).model_copy(update={"status": status,
                                                                          "status_reason": "the sweep was aborted"}),
             SweepResult(t=T0 + 31, sweep_id="s", levels=[1, 8, 64], outcome="aborted", peak_tok_s=2000.0)])
    return m


@pytest.mark.parametrize("status", ["aborted", "failed", "cut"])
async def test_a_not_ok_level_is_hollow_where_it_got_to_never_joined_never_the_peak(status):
    m = hollow_model(status)
    assert peak_point(m.curves["p"]) == (8, 400.0)
    text = sweep_status(m)
    assert "peak agg 400 tok/s @C=8" in text and "2000" not in text
    app = CurveApp(m, *CONTENT["120x40"])
    async with app.run_test(size=(70, 26)) as pilot:
        curve = await settle_curve(app, pilot)
        line = [d for d in curve._datasets if isinstance(d, LinePlot) and d.line_style == "bold green"][0]
        assert list(line.x) == [0.0, 3.0]  # not joined
        (hollow,) = scatters(curve, "○")
        assert list(hollow.x) == [6.0] and list(hollow.y) == [2000.0]  # at the figure it reached
        assert "○ not ok" in curve.legend


def test_a_sweep_of_an_unknown_profile_is_not_called_none() -> None:
    m = CockpitModel(raise_errors=True)
    m.apply([SweepStarted(t=T0, sweep_id="s", spec=spec([1, 8]), profile=None), level("s", 1, 60.0, 62.0, T0 + 10)])
    text = sweep_status(m)
    assert text.startswith("starting (1/2 levels done)") and "None" not in text, text  # no level_started seen
    m.apply([SweepStarted(t=T0 + 20, sweep_id="t", spec=spec([1, 8]), profile="ep8")])
    assert sweep_status(m).startswith("ep8: starting (0/2")


def test_the_report_and_the_sweep_never_take_a_not_ok_level_as_peak():
    m = hollow_model()
    levels = [ev for ev in m.sweep_events if isinstance(ev, LevelResult)]
    best = peak_level(levels, lambda lv: lv.agg_tok_s)
    assert best is not None and best.concurrency == 8
    (run,) = sweeps_of(m.sweep_events, "test")
    assert run.peak == (8, 400.0)


def test_a_not_ok_level_with_no_figure_sits_on_the_floor():
    fig_points = {1: CurvePoint(1, 50.0, 55.0), 8: CurvePoint(8, None, None, "failed", "8/8 failed")}
    m = CockpitModel(raise_errors=True)
    m.apply([SweepStarted(t=T0, sweep_id="s", spec=spec([1, 8]), profile="p")])
    m.curves["p"] = fig_points
    fig = curve_figure(m)
    assert fig.current is not None and [(h.concurrency, h.tok_s) for h in fig.current.hollow] == [(8, 0.0)]


async def test_steady_and_aggregate_are_told_apart_in_style_marker_and_legend():
    app = CurveApp(story_model(), *CONTENT["200x60"])
    async with app.run_test(size=(110, 36)) as pilot:
        curve = await settle_curve(app, pilot)
        (agg,) = scatters(curve, "●")
        (steady,) = scatters(curve, "◇")
        assert agg.marker_style != steady.marker_style
        assert "━● ep8-eplb agg (seed)" in curve.legend.replace("[bold green]", "").replace("[/]", "")
        assert "[cyan]┈◇ steady[/]" in curve.legend
        dots = [d for d in curve._datasets if isinstance(d, ScatterPlot) and d.hires_mode is not None]
        assert dots and dots[0].marker_style == steady.marker_style  # the steady line is dotted, its colour


def test_the_legend_names_each_overlay_and_fits_any_width():
    m = story_model()
    m.curves["a-very-long-profile-name"] = {8: CurvePoint(8, 100.0, 110.0)}
    items = legend_items(curve_figure(m))
    wide = fit_legend(items, 190)
    assert "ep8-tuned" in wide and "a-very-long-profile-name" in wide and "steady" in wide
    for width in (20, 30, 40, 60, 90):
        text = fit_legend(items, width)
        assert markup_len(text) <= width, (width, text)
        assert "agg" in text  # the run's own line is the last thing dropped


@pytest.mark.parametrize("size", list(CONTENT))
async def test_every_size_draws_a_readable_curve(size):
    w, h = CONTENT[size]
    app = CurveApp(story_model(), w, h)
    async with app.run_test(size=(w + 10, h + 6)) as pilot:
        curve = await settle_curve(app, pilot)
        assert curve.size.width == w and curve.size.height == h
        left = [row.strip() for row in canvas_text(curve, "margin-left") if row.strip()]
        assert 2 <= len(left) <= 6  # y ticks: 2-3 at 80x24, more with room
        plot = "\n".join(canvas_text(curve, "plot"))
        assert plot.count("●") == 3 and "◉now" in plot
        title, subtitle = curve.caption()
        assert title is not None and subtitle is not None
        assert markup_len(title) <= w + 2 and markup_len(subtitle) <= w + 2


def test_y_ticks_are_few_on_a_small_plot():
    assert len(nice_y_ticks(1700.0, 4)) in (2, 3)
    assert 4 <= len(nice_y_ticks(1700.0, 14)) <= 6


def test_the_running_level_moves_the_live_point():
    m = CockpitModel(raise_errors=True)
    m.apply([SweepStarted(t=T0, sweep_id="s", spec=spec([1, 8]), profile="p"),
             LevelStarted(t=T0, sweep_id="s", concurrency=8),
             SweepProgress(t=T0 + 1, sweep_id="s", concurrency=8, level_tokens=100, level_elapsed_s=1.0)])
    assert curve_figure(m).live == (8, 100.0)
    m.apply([SweepProgress(t=T0 + 2, sweep_id="s", concurrency=8, level_tokens=500, level_elapsed_s=2.0)])
    assert curve_figure(m).live == (8, 250.0)


async def test_a_short_curve_keeps_its_x_title_beside_the_y_title():
    app = CurveApp(story_model(), 76, 7)  # the 80x24 layout's wide, short curve
    async with app.run_test(size=(86, 13)) as pilot:
        curve = await settle_curve(app, pilot)
        top = canvas_text(curve, "margin-top")[0]
        assert "tok/s" in top and "x: concurrency C (log scale)" in top
