"""The knee on the cockpit's throughput curve (issue 34): a curve that bends carries the knee's marker at its C
and the knee's own one line where the panel has room; a curve that never bends (or too few levels) shows
nothing.  Drawn in the curve's own small app (tests/test_tui_curve.py) at the cockpit's content sizes."""

from __future__ import annotations

import math

import pytest

from kimitui.analysis.knee import knee_of_levels
from kimitui.events import SweepResult, SweepStarted
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.curve_series import curve_at, curve_figure
from kimitui.tui.renderables.curve_legend import KNEE_MARK
from kimitui.tui.widgets.sweep_curve import SweepCurve
from tests.support.fakecontrol import EPLB, T0, TUNED, level, spec
from tests.test_tui_curve import CONTENT, CurveApp, canvas_text, settle_curve

BENDS = TUNED
"""ep8-tuned's curve: flattens from C≈85 while TPOT keeps rising (its knee is C≈85)."""
STRAIGHT = [(1, 60.0, 61.0), (4, 240.0, 244.0), (16, 950.0, 960.0), (64, 3700.0, 3750.0)]
"""Throughput still doubling with C at the last level: no knee within the levels measured."""


def model_of(points: list[tuple[int, float, float]], profile: str = "ep8-tuned") -> CockpitModel:
    m = CockpitModel(raise_errors=True)
    m.apply([SweepStarted(t=T0, sweep_id="k1", spec=spec(), profile=profile)])
    m.apply([level("k1", c, a, s, T0 + 1 + i) for i, (c, a, s) in enumerate(points)])
    m.apply([SweepResult(t=T0 + 20, sweep_id="k1", levels=[c for c, _, _ in points],
                         peak_tok_s=max(a for _, a, _ in points))])
    return m


def test_a_curve_that_bends_has_its_knee_in_the_figure():
    knee = knee_of_levels([level("k1", c, a, s, T0 + i) for i, (c, a, s) in enumerate(BENDS)])
    assert knee.status == "knee" and knee.concurrency is not None
    fig = curve_figure(model_of(BENDS))
    assert fig.knee is not None and fig.current is not None
    c, y = fig.knee
    assert c == pytest.approx(knee.concurrency)
    lo = max((cc, yy) for cc, yy in fig.current.agg if cc <= c)  # the marker stands on the drawn line
    hi = min((cc, yy) for cc, yy in fig.current.agg if cc >= c)
    assert lo[1] <= y <= hi[1]
    assert fig.knee_note == knee.line() and fig.knee_note.startswith(f"knee at C≈{c:.0f}: beyond it ")
    assert fig.knee_label == f"knee C≈{c:.0f}"


@pytest.mark.parametrize("points, why", [(STRAIGHT, "no knee within"), (EPLB[:2], "too few levels")])
def test_no_knee_no_mark(points, why):
    m = model_of(points)
    assert m.sweep is not None and why in m.sweep.knee.line()
    fig = curve_figure(m)
    assert fig.knee is None and fig.knee_note == "" and fig.knee_label == ""


def test_curve_at_is_geometric_on_log2_c():
    pts = [(64, 1000.0), (256, 4000.0)]
    assert curve_at(pts, 128) == pytest.approx(2000.0)
    assert curve_at(pts, 64) == pytest.approx(1000.0)
    assert curve_at(pts, 512) is None


def knee_column(curve: SweepCurve) -> int:
    assert curve._knee is not None
    return curve.get_pixel_from_coordinate(*curve._knee)[0]


@pytest.mark.parametrize("size", list(CONTENT))
async def test_the_plot_marks_the_knee_and_says_it_where_there_is_room(size):
    w, h = CONTENT[size]
    app = CurveApp(model_of(BENDS), w, h)
    async with app.run_test(size=(w + 10, h + 6)) as pilot:
        curve = await settle_curve(app, pilot)
        plot = canvas_text(curve, "plot")
        col = knee_column(curve)
        assert curve._knee is not None and math.log2(64) < curve._knee[0] < math.log2(96)
        marks = [row[col] for row in plot]
        assert marks.count(KNEE_MARK) >= 2, "\n".join(plot)  # a vertical run of the marker at the knee's C
        assert all(row.count(KNEE_MARK) <= 1 for row in plot)  # one column only
        _, subtitle = curve.caption()
        note = curve_figure(curve.model).knee_note
        shown = "\n".join(plot) + "\n" + (subtitle or "")
        if size == "200x60":
            assert note in shown  # the whole one line, on the plot's top row or in the subtitle
        else:
            assert "knee" in shown


async def test_no_knee_nothing_on_the_plot():
    w, h = CONTENT["120x40"]
    app = CurveApp(model_of(STRAIGHT), w, h)
    async with app.run_test(size=(w + 10, h + 6)) as pilot:
        curve = await settle_curve(app, pilot)
        shown = "\n".join(canvas_text(curve, "plot")) + (curve.caption()[1] or "")
        assert KNEE_MARK not in shown and "knee" not in shown


async def test_a_wide_panel_says_the_knee_in_its_subtitle_and_labels_the_marker_short():
    w, h = 230, 28  # room for the status, the capacity answer and the knee
    app = CurveApp(model_of(BENDS), w, h)
    async with app.run_test(size=(w + 10, h + 6)) as pilot:
        curve = await settle_curve(app, pilot)
        fig = curve_figure(curve.model)
        _, subtitle = curve.caption()
        assert subtitle is not None and subtitle.endswith(f" · {fig.knee_note}")
        plot = "\n".join(canvas_text(curve, "plot"))
        assert fig.knee_note not in plot and fig.knee_label in plot  # said once; the marker keeps its label
        assert KNEE_MARK in plot
