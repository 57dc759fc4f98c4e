"""Back to the baseline in one key (issue 32, "No way back in one key").

From the compare view, going back to the baseline took Esc, the profile's number and Enter.  Where the verdict
is, ``b`` (and the palette's "Swap to baseline") now takes the same swap path as a profile key: its confirm,
with the diff, first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kimitui.live import LiveController
from kimitui.tui.app import KimituiApp
from kimitui.tui.screens.compare import CompareScreen
from kimitui.tui.screens.swap_confirm import SwapConfirm
from tests.support.cockpit_drive import serving, swap, sweep
from tests.support.tuiscreen import screen_text, settle, tick, wait_for

pytestmark = pytest.mark.timeout(300)

SIZES = [(200, 55), (120, 40), (80, 24)]


@pytest.fixture(autouse=True)
def short_sweeps(sim_home: Path) -> None:
    """The sweep form's remembered defaults in sim_home: a short level (as tests/test_tui_e2e.py does)."""
    state = sim_home / "state" / "kimitui"
    state.mkdir(parents=True)
    (state / "sweep-defaults.json").write_text(json.dumps({"requests_per_level": 4, "stop_on_oversaturation": False}))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_b_in_the_compare_view_swaps_back_to_the_baseline_after_its_confirm(sim_home: Path,
                                                                                 size: tuple[int, int]):
    ctrl = LiveController(record=False)
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=size) as pilot:
        await serving(app, "ep8-tuned")
        await pilot.press("b")  # the known-good one
        await wait_for(app, lambda: app.model.baseline == "ep8-tuned", 10, "the baseline mark")
        await sweep(app, pilot)
        await swap(app, pilot, "6", "ep8-eplb")
        await sweep(app, pilot)

        await pilot.press("c")
        await wait_for(app, lambda: isinstance(app.screen, CompareScreen), 10, "the compare view")
        await wait_for(app, lambda: "compared at C=1" in screen_text(app), 60, "the verdict")
        await settle(app, pilot)
        text = screen_text(app)
        assert "b back to baseline ep8-tuned" in text, text  # said where the verdict is

        await pilot.press("b")
        await wait_for(app, lambda: isinstance(app.screen, SwapConfirm), 10, "the confirm for the baseline")
        await settle(app, pilot)
        assert isinstance(app.screen, SwapConfirm) and app.screen.plan.target == "ep8-tuned"
        assert ctrl.busy is None and app.model.profile == "ep8-eplb", "nothing may start before the confirm"
        text = screen_text(app)
        assert "Swap ep8-eplb → ep8-tuned" in text and "enable_eplb" in text  # its diff
        assert "⚠" not in text and "✓ ep8-tuned is the baseline" in text, text  # no attention needed
        await pilot.press("y")
        await serving(app, "ep8-tuned")


async def test_the_palette_offers_swap_to_baseline_through_the_same_confirm(sim_home: Path):
    ctrl = LiveController(record=False)
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await serving(app, "ep8-tuned")
        await pilot.press("b")
        await wait_for(app, lambda: app.model.baseline == "ep8-tuned", 10, "the baseline mark")
        await swap(app, pilot, "6", "ep8-eplb")
        await pilot.press("ctrl+p")
        await tick(pilot)
        await pilot.press(*"baseline")
        await wait_for(app, lambda: "Swap to baseline ep8-tuned" in screen_text(app), 10, "the palette's entry")
        await pilot.press("enter")
        await wait_for(app, lambda: isinstance(app.screen, SwapConfirm), 10, "the confirm for the baseline")
        assert isinstance(app.screen, SwapConfirm) and app.screen.plan.target == "ep8-tuned"
        assert ctrl.busy is None and app.model.profile == "ep8-eplb"


async def test_help_says_where_b_goes_back_to_the_baseline() -> None:
    """The key lives in the compare view; `?` on the main screen says so (issue 32)."""
    from kimitui.tui.screens.help import HelpScreen

    from tests.support.fakecontrol import FakeController

    app = KimituiApp(FakeController(), tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")
        await settle(app, pilot)
        assert isinstance(app.screen, HelpScreen)
        from rich.console import Console
        from textual.widgets import Static

        console = Console(width=200, record=True, file=__import__("io").StringIO())
        for static in app.screen.query(Static):
            console.print(static.content)
        assert "b swaps back to the baseline" in console.export_text()
