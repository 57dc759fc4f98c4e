"""The cockpit over a real ReplayController: the recorded story looks the same, and the jumps work."""

from __future__ import annotations

from pathlib import Path

from kimitui.recording import write_recording
from kimitui.replay import ReplayController
from kimitui.tui.app import KimituiApp
from kimitui.tui.screens.swap_confirm import SwapConfirm
from kimitui.tui.widgets.level_table import LevelTable
from kimitui.tui.widgets.replay_bar import ReplayBar
from kimitui.tui.widgets.straggler_list import StragglerList
from tests.support.fakecontrol import story_events
from tests.support.tuiscreen import screen_text, settle, tick


async def test_replayed_story_shows_the_same_panels_and_jumps_to_the_straggler(tmp_path: Path):
    path = write_recording(tmp_path / "story.jsonl", story_events())
    ctrl = ReplayController(path, speed=None)  # as fast as it reads
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(app, pilot, rounds=3)
        for _ in range(20):
            if app.model.sweep is not None and app.model.sweep.sweep_id == "s2" and app.model.sweep.progress:
                break
            await tick(pilot)
            app.pump(force_charts=True)
        m = app.model
        assert (m.profile, m.baseline) == ("ep8-eplb", "ep8-tuned")
        assert app.query_one(LevelTable).row_count == 4  # 3 levels + the running C=64
        assert app.query_one(StragglerList).row_count == 1
        text = screen_text(app)
        assert "▶ replay" in text and str(path.name) in text
        bar = app.query_one(ReplayBar)
        assert bar.speed is None  # "max": the controller's own speed is shown
        await pilot.press("j")  # at the end: nothing further
        await settle(app, pilot)
        assert any("no later straggler" in n.message for n in app._notifications)
        await pilot.press("J")  # back to it
        await settle(app, pilot)
        assert any(n.message.startswith("straggler at") for n in app._notifications)
        await pilot.press("1")  # swapping is live-only: the key is inert in a replay
        await tick(pilot)
        assert not isinstance(app.screen, SwapConfirm)


async def test_seeking_back_forgets_what_happened_after_the_new_position(tmp_path: Path):
    """A backward seek is followed by ReplayState(reset=True): the screen starts over from there."""
    path = write_recording(tmp_path / "story.jsonl", story_events())
    ctrl = ReplayController(path, speed=None)
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(20):
            await tick(pilot)
            app.pump(force_charts=True)
            if app.model.sweep is not None and app.model.sweep.levels:
                break
        assert app.query_one(LevelTable).row_count > 0
        if ctrl.play_pause():  # pause, so the replay stays where the seek puts it
            ctrl.play_pause()
        first = min(e.t for e in story_events())
        await ctrl.seek(first)
        for _ in range(5):
            await tick(pilot)
            app.pump(force_charts=True)
        assert app.model.sweep is None and app.model.curves == {}
        assert app.query_one(LevelTable).row_count == 0
