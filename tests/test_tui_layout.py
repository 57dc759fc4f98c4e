"""Issue 15: the layout follows the state, keeps a curve at 80x24, names the keys and makes focus obvious."""

from __future__ import annotations

import pytest

from kimitui.events import ProfileState, ProfileSwitch, SweepResult
from kimitui.tui.app import KimituiApp
from kimitui.tui.model.layout_mode import layout_mode
from kimitui.tui.widgets.panel import Panel
from kimitui.tui.widgets.profile_bar import ProfileBar
from tests.support.fakecontrol import T0, FakeController, StoryController
from tests.support.screen_states import after_sweep_events, drawn, serving_events
from tests.support.tuiscreen import screen_text


def _rows(app: KimituiApp, selector: str) -> int:
    return app.query_one(selector).region.height


def _footer_text(app: KimituiApp) -> str:
    from textual.widgets import Footer
    return " ".join(str(k.render()) for k in app.query_one(Footer).query("FooterKey"))


async def _footer_says(pilot, holds, timeout_s: float = 3.0) -> None:
    """The footer recomposes after a focus change, a frame or two later (more on a loaded machine)."""
    for _ in range(int(timeout_s / 0.05)):
        if holds(_footer_text(pilot.app)):
            return
        await pilot.pause(0.05)
    raise AssertionError(f"footer never matched: {_footer_text(pilot.app)!r}")


async def test_before_any_sweep_the_charts_give_their_room_to_gpus_and_log():
    """Seen: before a sweep ~40 % of the screen was two empty 0-1 charts and the GPUs a thin strip."""
    app = KimituiApp(FakeController(initial=serving_events()), tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await drawn(pilot)
        assert app.layout_shown == "monitor"
        assert not app.query_one("#row-mid").display and not app.query_one("#panel-sweep").display
        assert "No sweep yet" in screen_text(app) and "Press s" in screen_text(app).replace("  ", " ")
        assert _rows(app, "#panel-strip") <= 6
        assert _rows(app, "#panel-log") >= 16, "the log gets the room the empty charts had"
        assert _rows(app, "#panel-gpus") >= 10, "all eight GPUs and their header line"


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)], ids=["80x24", "120x40", "200x60"])
async def test_during_a_sweep_the_curve_gets_the_room_at_every_size(size):
    """Seen: at 80x24 the charts disappeared entirely."""
    app = KimituiApp(StoryController(), tick=None)
    async with app.run_test(size=size) as pilot:
        await drawn(pilot)
        assert app.layout_shown == "sweep"
        curve = app.query_one("#curve").region
        assert curve.height >= (6 if size[1] < 30 else 12) and curve.width >= 36, curve
        assert not app.query_one("#panel-strip").display
        if size[0] >= 100:
            assert app.query_one("#panel-spread").region.height == app.query_one("#panel-curve").region.height


def test_layout_mode_follows_sweep_and_swap():
    from kimitui.tui.model.cockpit_state import CockpitModel

    m = CockpitModel()
    m.apply(serving_events(minutes=0))
    assert layout_mode(m) == "monitor"
    m.apply(after_sweep_events())
    assert layout_mode(m) == "sweep", "after a sweep its curve stays in view"
    m.apply([ProfileState(t=T0 + 200, profile="tp8", state="starting"),
             ProfileSwitch(t=T0 + 230, from_profile="ep8-eplb", to_profile="tp8", outcome="ok"),
             ProfileState(t=T0 + 230, profile="tp8", state="serving")])
    assert layout_mode(m) == "monitor", "the last sweep measured a profile that is gone"
    m.apply([SweepResult(t=T0 + 240, sweep_id="other", outcome="completed")])
    assert layout_mode(m) == "monitor", "another sweep's result does not bring back this one"


async def test_footer_names_compare_and_the_profile_keys():
    """Seen: the footer lacked c (compare) and the names of the profile keys."""
    app = KimituiApp(StoryController(), tick=None)
    async with app.run_test(size=(200, 60)) as pilot:
        await drawn(pilot)
        assert "compare" in _footer_text(app)
        bar = str(app.query_one(ProfileBar).render())
        for key, name in (("1", "ep8-tuned"), ("2", "ep8-v2"), ("3", "ep8-eplb"), ("4", "tp8")):
            assert f"{key} {name}" in bar


def test_the_profile_line_says_the_sglang_version_the_running_profile_is_on():
    """Issue 31: a flag's meaning depends on the host's SGLang; the version shows with the running profile."""
    from kimitui.events import ServerInfo
    from kimitui.tui.model.cockpit_state import CockpitModel
    from kimitui.tui.widgets.profile_bar import profile_line

    m = CockpitModel()
    m.apply(serving_events(minutes=0))
    m.apply([ServerInfo(t=T0 + 1, url="http://127.0.0.1:30000", version="0.5.23", args={"tp_size": 8})])
    assert m.sglang_version == "0.5.23"
    line = profile_line({"1": "ep8-tuned"}, m.profile, "serving", False, m.sglang_version).plain
    assert line.endswith("│ on SGLang 0.5.23")
    m.apply([ProfileSwitch(t=T0 + 30, from_profile=m.profile, to_profile="tp8", outcome="ok")])
    assert m.sglang_version is None  # a new server: its own /server_info will say


async def test_the_footer_lists_the_focused_views_keys():
    app = KimituiApp(StoryController(), tick=None)
    async with app.run_test(size=(200, 60)) as pilot:
        await drawn(pilot)
        app.query_one("#panel-log").focus()
        await _footer_says(pilot, lambda text: "severity" in text and "search" in text)
        app.query_one("#panel-gpus").focus()
        await _footer_says(pilot, lambda text: "severity" not in text and "processes" in text)


async def test_the_focused_panel_is_obvious_not_only_by_hue():
    """Seen: which panel has focus was only visible from border colours."""
    app = KimituiApp(StoryController(), tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await drawn(pilot)
        app.query_one("#panel-gpus").focus()
        await pilot.pause(0.05)
        kinds = {p.id: p.styles.border_top[0] for p in app.query(Panel) if p.display}
        assert kinds["panel-gpus"] == "heavy"
        assert {k for p, k in kinds.items() if p != "panel-gpus"} == {"round"}
        assert str(app.query_one("#panel-gpus").styles.border_title_background) != \
            str(app.query_one("#panel-log").styles.border_title_background), "...on a block of accent"
