"""Causes on screen (issue 18): the seeds' C=1 straggler shows "EPLB rebalance" in the straggler list, first in
its detail view, in the level table's loss column, live and through a replay of a recording; a link that
delivers the rebalance's end late still gets it; a gap nothing explains says "Unknown".
"""

from __future__ import annotations

from pathlib import Path

from kimitui.events import LevelResult, LogLine
from kimitui.recording import write_recording
from kimitui.telemetry.logparse import to_event
from kimitui.replay import ReplayController
from kimitui.tui.app import KimituiApp
from kimitui.tui.cockpit_state import CockpitModel
from kimitui.tui.screens.straggler_detail import StragglerDetail
from kimitui.tui.widgets.level_table import LevelTable
from kimitui.tui.widgets.straggler_list import StragglerList
from tests.support.fakecontrol import FakeController
from tests.support.gapcase import GAP_S, GAP_START, gap_case_events
from tests.support.tuiscreen import screen_text, settle, tick, wait_for

CAUSE_LINE = "EPLB rebalance, 35.6 s, covers 99 % of the 35.6 s gap"


def _model(events) -> CockpitModel:
    model = CockpitModel()
    model.apply(events)
    return model


def test_the_seeds_straggler_and_its_level_are_explained_in_the_model() -> None:
    model = _model(gap_case_events())
    a = model.causes.attributions["s2-c1-r4"]
    assert (a.cause, a.confidence) == ("eplb", "high")
    loss = model.causes.loss("s2", 1)
    assert loss is not None and loss.main_cause == "eplb"


def test_a_rebalance_end_the_link_delivered_late_still_counts() -> None:
    """The level's result arrives before the rebalance's end line (a slow link): re-attributed when it comes."""
    events = [e for e in gap_case_events() if not (isinstance(e, LogLine) and "rebalance" in e.raw)]
    level = next(e for e in events if isinstance(e, LevelResult))
    late = [to_event(x.raw, host="sim", source="file", t=level.t + 6.0 + k * 0.001)  # parsed as a host sends them
            for k, x in enumerate(x for x in gap_case_events() if isinstance(x, LogLine) and "rebalance" in x.raw)]
    model = _model(events)
    assert model.causes.attributions["s2-c1-r4"].cause == "unknown"
    model.apply(late)
    a = model.causes.attributions["s2-c1-r4"]
    assert a.cause == "eplb", a


def test_a_gap_nothing_explains_is_unknown_on_screen() -> None:
    events = [e for e in gap_case_events() if not (isinstance(e, LogLine) and "rebalance" in e.raw)]
    model = _model(events)
    a = model.causes.attributions["s2-c1-r4"]
    assert a.cause == "unknown" and a.confidence in ("none", "low")


async def _open(app: KimituiApp, pilot) -> str:
    await settle(app, pilot)
    listed = screen_text(app)
    app.query_one(StragglerList).focus()
    await pilot.press("enter")
    await tick(pilot)
    await tick(pilot)
    assert isinstance(app.screen, StragglerDetail)
    return listed


async def test_on_screen_list_detail_and_level_table() -> None:
    app = KimituiApp(FakeController(initial=gap_case_events()), tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        listed = await _open(app, pilot)
        assert "EPLB 99%" in listed
        table = app.query_one(LevelTable)
        assert "loss" in [str(c.label) for c in table.columns.values()]
        detail = screen_text(app)
        assert CAUSE_LINE in detail
        assert detail.index(CAUSE_LINE) < detail.index("s2-c1-r4 at C=1 ran at")  # the cause first, then the facts
        assert "rebalance end time=35.6" in detail


async def test_through_a_replay_of_a_recording(tmp_path: Path) -> None:
    rec = tmp_path / "story.jsonl"
    write_recording(rec, gap_case_events())
    app = KimituiApp(ReplayController(str(rec), speed=None), tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(app, lambda: app.model.sweep is not None and app.model.sweep.stragglers, 20, "the replay")
        await _open(app, pilot)
        assert CAUSE_LINE in screen_text(app)


def test_gap_bounds_of_the_case() -> None:
    assert GAP_S == 35.6 and GAP_START > 0  # the numbers the sentences above quote
