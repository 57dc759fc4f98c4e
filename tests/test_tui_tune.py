"""The autopilot from the cockpit: ``a`` shows the plan, Enter starts it, ``a`` again shows its steps and
the overlaid curves; pause, stop (the best serves again); the header says where it stands.

The live controller on the embedded simulated host at a 40x clock, each step's sweep one short level."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kimitui.live import LiveController
from kimitui.tune import state as store
from kimitui.tune.lock import LOCK_NAME, TuneLocked, acquire
from kimitui.tui.app import KimituiApp
from kimitui.tui.screens.tune_screen import TuneScreen
from kimitui.tui.widgets.header_bar import HeaderBar
from tests.support.tuiscreen import screen_text, tick, wait_for

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(autouse=True)
def short_sweeps(sim_home: Path) -> None:
    state = sim_home / "state" / "kimitui"
    state.mkdir(parents=True)
    (state / "sweep-defaults.json").write_text(json.dumps(
        {"levels": [1, 8], "requests_per_level": 8, "max_tokens": 64, "stop_on_oversaturation": False}))


async def test_the_autopilot_from_the_cockpit_plans_runs_pauses_and_stops_with_the_best_serving(sim_home: Path):
    ctrl = LiveController(record=False)
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(app, lambda: app.model.profile_state == "serving", 90, "ep8-tuned to serve")
        await pilot.press("a")
        await wait_for(app, lambda: isinstance(app.screen, TuneScreen), 10, "the plan")
        plan = screen_text(app)
        assert "tune sim from ep8-tuned" in plan and "1. enable_eplb true" in plan and "skipped: ep8-v2" in plan
        await pilot.press("enter")
        await wait_for(app, lambda: app.model.tune is not None and app.model.tune.status == "running", 20, "it to run")
        await wait_for(app, lambda: app.model.tune is not None and app.model.tune.step == 1, 120, "step 1")
        assert "autopilot" in app.query_one(HeaderBar).render().plain
        where = store.resumable("sim")  # one autopilot per tune: `kimitui tune --resume` cannot drive this one
        assert where is not None
        with pytest.raises(TuneLocked, match=rf"pid {os.getpid()} \(the cockpit, started "):
            acquire(where, "kimitui tune --resume")
        await pilot.press("s")  # the operator's own sweep waits for the autopilot: said, not started
        await tick(pilot)
        assert not isinstance(app.screen, TuneScreen)
        assert any("the autopilot is running" in n.message for n in app._notifications)
        await pilot.press("a")
        await wait_for(app, lambda: isinstance(app.screen, TuneScreen), 10, "the steps")
        await tick(pilot)
        text = screen_text(app)
        assert "Autopilot" in text and "enable_eplb true" in text and "ep_size 4" in text
        await pilot.press("p")
        await wait_for(app, lambda: app.model.tune is not None and app.model.tune.status == "paused", 20, "paused")
        await pilot.press("a")
        await wait_for(app, lambda: isinstance(app.screen, TuneScreen), 10, "the steps again")
        await pilot.press("x")  # stop: the best so far serves again
        await wait_for(app, lambda: app.model.tune is not None and app.model.tune.status == "stopped", 120, "stopped")
        await wait_for(app, lambda: app.model.profile_state == "serving", 60, "the best to serve")
        assert app.model.profile == app.model.tune.best
        assert "stopped" in app.query_one(HeaderBar).render().plain
        await wait_for(app, lambda: not (where / LOCK_NAME).exists(), 20, "the tune's lock to be released")
    await ctrl.shutdown()
