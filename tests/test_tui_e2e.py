"""End to end: the cockpit on the embedded simulated host with the LIVE controller.

Real launcher, simulated SGLang server, GPU agent on fake NVML, log follower,
metrics poller, sweep worker and recorder; the test only presses keys and reads
the screen.  ep8-eplb at a 40x clock: its EPLB rebalance stalls a C=1 request.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Input

from kimitui.live import LiveController
from kimitui.recording import read_recording
from kimitui.tui.app import KimituiApp
from kimitui.tui.screens.straggler_detail import StragglerDetail
from kimitui.tui.screens.sweep_form import SweepForm
from kimitui.tui.widgets.level_table import LevelTable
from kimitui.tui.widgets.straggler_list import StragglerList
from tests.support.tuiscreen import screen_text, tick, wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def short_sweep_defaults(sim_home: Path) -> None:
    """In sim_home (tests/conftest.py), the sweep form's remembered defaults: a short level,
    a gap threshold that fits a 40x clock."""
    state = sim_home / "state" / "kimitui"
    state.mkdir(parents=True)
    (state / "sweep-defaults.json").write_text(json.dumps(
        {"requests_per_level": 4, "straggler_gap_s": 0.005, "stop_on_oversaturation": False}))


async def _wait(app: KimituiApp, pilot, pred, timeout: float, what: str) -> None:
    await wait_for(app, pred, timeout, what)


async def test_live_cockpit_sweeps_and_shows_levels_and_a_straggler(sim_home: Path):
    rec = sim_home / "session.jsonl"
    ctrl = LiveController(record_path=str(rec), default_profile="ep8-eplb")
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await _wait(app, pilot, lambda: app.model.profile_state == "serving" and app.model.profile == "ep8-eplb",
                    90, "ep8-eplb to serve")
        await _wait(app, pilot, lambda: len(app.model.gpus) == 8 and app.model.server, 30, "GPUs and server stats")
        text = screen_text(app)
        # the header shows the recording's whole path where it fits, elided in its middle where it does not
        assert "ep8-eplb" in text and "serving" in text and (str(rec) in text or f"…/{rec.name}" in text)
        assert "fired up and ready to roll" in "\n".join(e.text for e in app.model.logs)

        await pilot.press("s")
        await tick(pilot)
        assert isinstance(app.screen, SweepForm)
        app.screen.query_one("#sweep-levels", Input).value = "1"
        app.screen.query_one("#sweep-max-tokens", Input).value = "512"
        await pilot.click("#sweep-start")
        await _wait(app, pilot, lambda: app.model.sweep is not None and app.model.sweep.outcome is not None,
                    90, "the sweep to finish")
        outcome = app.model.sweep.outcome if app.model.sweep is not None else None
        assert outcome is not None and outcome.outcome == "completed", outcome
        await tick(pilot)

        table = app.query_one(LevelTable)
        assert table.row_count == 1 and str(table.get_row_at(0)[0]) == "1"
        stragglers = app.query_one(StragglerList)
        assert stragglers.row_count >= 1, "the EPLB rebalance must leave a straggler at C=1"
        text = screen_text(app)
        # the panel's title: "Levels & stragglers", or the worst level's loss sentence where one lost 5 % (issue 18)
        assert "Levels" in text and "completed" in text

        stragglers.focus()
        await pilot.press("enter")
        await tick(pilot)
        assert isinstance(app.screen, StragglerDetail)
        assert "Straggler" in screen_text(app) and "GPUs" in screen_text(app)
        await pilot.press("escape")
        await pilot.press("q")
        await tick(pilot)
    recording = read_recording(rec)
    kinds = {e.kind for e in recording.events}
    assert {"gpu_sample", "log_line", "level_result", "sweep_result"} <= kinds
