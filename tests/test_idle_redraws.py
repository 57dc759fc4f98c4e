"""The cockpit at rest redraws only what changed, and only as often as a person can read it (issue 33).

Each test counts the redraws the painter makes (no timing): the idle cockpit took 8-9 % of a core because the
monitor layout's sweep strip was redrawn at every 3 Hz pump while the curve it shares a part with stayed hidden,
each redraw set its panel's title again (a repaint of the whole panel and its scroll bars), and the GPU panel
was redrawn with every pump.
"""

from __future__ import annotations

import time
from collections import Counter

from kimitui.tui.app import KimituiApp
from kimitui.tui.painter import GPU_PERIOD_S, LEVELS_PERIOD_S
from kimitui.tui.widgets.gpu_panel import GpuPanel
from kimitui.tui.widgets.panel import Panel
from kimitui.tui.widgets.sweep_curve import SweepCurve
from kimitui.tui.widgets.sweep_strip import SweepStrip
from tests.support.fakecontrol import T0, FakeController, gpu_sample, story_events


def _count_redraws(app: KimituiApp, *types: type) -> Counter[str]:
    """Wrap each mounted widget of these types' ``redraw`` to count its calls by type name."""
    counts: Counter[str] = Counter()
    for kind in types:
        for widget in app.query(kind):
            def counted(original=widget.redraw, name=kind.__name__) -> None:
                counts[name] += 1
                original()
            widget.redraw = counted  # type: ignore[method-assign]
    return counts


async def test_a_part_hidden_in_one_widget_is_not_redrawn_again_in_the_one_shown() -> None:
    """The monitor layout hides the curve but shows the sweep strip, both drawn from "curve": one change, one redraw."""
    app = KimituiApp(FakeController(), tick=None)
    async with app.run_test(size=(200, 55)) as pilot:
        await pilot.pause()
        app.pump(force_charts=True)
        await pilot.pause()
        assert not all(node.display for node in app.query_one(SweepCurve).ancestors_with_self
                       if hasattr(node, "display")), "the monitor layout shows no curve"
        counts = _count_redraws(app, SweepStrip)
        app.painter.mark("curve")
        for _ in range(5):
            app.pump(force_charts=True)
        assert counts["SweepStrip"] == 1
        assert "curve" in app.painter.dirty, "still owed to the hidden curve, drawn once the layout shows it"


async def test_a_caption_that_did_not_change_is_not_set_again() -> None:
    """Setting a border title repaints the panel: a redraw with the same caption leaves the panel alone."""
    app = KimituiApp(FakeController(), tick=None)
    async with app.run_test(size=(200, 55)) as pilot:
        await pilot.pause()
        app.pump(force_charts=True)
        await pilot.pause()
        panel = app.query_one(GpuPanel).parent
        assert isinstance(panel, Panel) and panel.border_title
        repaints: list[object] = []
        original = panel.refresh

        def counted(*args: object, **kwargs: object) -> object:
            repaints.append(args)
            return original(*args, **kwargs)

        panel.refresh = counted  # type: ignore[method-assign]  # a title's setter calls the panel's refresh
        same = gpu_sample(T0 + 1, 0.0)
        for i in range(3):
            app.controller.session.publish(same.model_copy(update={"t": T0 + 1 + i, "seq": 1 + i}))
            app.pump(force_charts=True)
        assert repaints == []


async def test_the_gpu_panel_is_redrawn_at_most_every_gpu_period() -> None:
    """Samples at 4 Hz, a pump at 3 Hz: the GPU panel waits for its period, then shows the newest sample."""
    app = KimituiApp(FakeController(), tick=None)
    async with app.run_test(size=(200, 55)) as pilot:
        await pilot.pause()
        app.pump(force_charts=True)
        await pilot.pause()
        app.painter.paced, app.painter.periods["gpus"] = True, GPU_PERIOD_S  # as the timer's cockpit draws
        app.painter.last_drawn["gpus"] = time.monotonic()  # drawn just now
        counts = _count_redraws(app, GpuPanel)
        session = app.controller.session
        for i in range(4):
            session.publish(gpu_sample(T0 + 1 + i * 0.25, 40.0 + i, seq=10 + i))
            app.pump()  # not forced: within the period of the draw above
        assert counts["GpuPanel"] == 0 and "gpus" in app.painter.dirty
        app.painter.last_drawn["gpus"] -= app.painter.periods["gpus"]  # the period has passed
        app.pump()
        assert counts["GpuPanel"] == 1 and "gpus" not in app.painter.dirty
        assert app.fleet.model.gpus[0].reading.util_pct == 43.0  # the newest sample is what it drew


async def test_the_timers_cockpit_draws_one_chart_a_pump_and_the_levels_once_a_second() -> None:
    """Curve and spread chart due at once are two costly renders in one frame (a key pressed then waits for both):
    the shown chart that waited longest goes first, the other a pump later; the levels table waits for its period."""
    app = KimituiApp(FakeController(initial=story_events()), tick=None)
    async with app.run_test(size=(200, 55)) as pilot:
        await pilot.pause()
        app.pump(force_charts=True)
        await pilot.pause()
        assert app.layout_shown == "sweep"
        painter = app.painter
        painter.paced, painter.periods["levels"] = True, LEVELS_PERIOD_S
        now = time.monotonic()
        painter.last_drawn.update({"curve": now - 5, "spread": now - 3, "levels": now})
        painter.mark("curve", "spread", "levels")
        assert app.pump() & {"curve", "spread", "levels"} == {"curve"}
        assert app.pump() & {"curve", "spread", "levels"} == {"spread"}
        assert app.pump() & {"curve", "spread", "levels"} == set()
        painter.last_drawn["levels"] -= LEVELS_PERIOD_S
        assert "levels" in app.pump()
