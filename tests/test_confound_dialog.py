"""The confound dialog on the simulated host (issue 32, "Take X instead swaps at once").

Tab+Enter on the dialog for ``ep8-v2`` started a 50 s swap to ``ep8-cont16``, a profile the same dialog said
has no effect, without showing its diff.  Now only alternatives that can matter are offered, and taking one
shows that profile's own confirm (its diff, the guard's line against the baseline) before anything starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button

from kimitui.live import LiveController
from kimitui.tui.app import KimituiApp
from kimitui.tui.screens.swap_confirm import SwapConfirm
from tests.support.cockpit_drive import serving_with_baseline, swap_dialog
from tests.support.tuiscreen import screen_text, settle, tick, wait_for

pytestmark = pytest.mark.timeout(240)

SIZES = [(200, 55), (120, 40), (80, 24)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_taking_the_offered_variant_shows_its_diff_and_asks_before_any_swap(sim_home: Path,
                                                                                    size: tuple[int, int]):
    ctrl = LiveController(record=False)
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=size) as pilot:
        await serving_with_baseline(app, pilot)
        dialog = await swap_dialog(app, pilot, "8")  # ep8-v2: continuous decode 16 and EPLB at once
        assert dialog.plan.target == "ep8-v2" and dialog.plan.confounded
        offered = [str(b.label) for b in dialog.query(Button) if (b.id or "").startswith("swap-variant")]
        # ep8-cont16 changes only a knob lint says has no effect: measuring it teaches nothing
        assert offered == ["Take ep8-eplb instead…"], offered
        text = screen_text(app)
        assert "Take ep8-eplb instead" in text and "Take ep8-cont16" not in text
        assert "confounded" in text  # a confounded change stays a warning

        await pilot.press("enter")  # the focus is on the offered variant
        await wait_for(app, lambda: isinstance(app.screen, SwapConfirm) and app.screen.plan.target == "ep8-eplb",
                       10, "ep8-eplb's own confirm")
        await settle(app, pilot)
        assert ctrl.busy is None and app.model.profile == "ep8-tuned", "nothing may start before the confirm"
        text = screen_text(app)
        assert "Swap ep8-tuned → ep8-eplb" in text and "enable_eplb" in text  # its diff
        # one knob changed is good news, and it does not change the knob that has no effect: no warning
        assert "⚠" not in text and "has no effect" not in text
        assert "one knob changed from the baseline ep8-tuned" in text

        await pilot.press("enter")  # now it swaps
        await wait_for(app, lambda: app.model.profile == "ep8-eplb" and app.model.profile_state == "serving", 90,
                       "ep8-eplb to serve")


@pytest.mark.parametrize("tabs", [1, 2, 3])
async def test_tab_and_enter_never_start_a_swap_without_a_confirm_that_shows_the_diff(sim_home: Path, tabs: int):
    ctrl = LiveController(record=False)
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await serving_with_baseline(app, pilot)
        await swap_dialog(app, pilot, "8")
        for _ in range(tabs):
            await pilot.press("tab")
        focused = app.focused.id if app.focused is not None else None
        await pilot.press("enter")
        await tick(pilot)
        await settle(app, pilot)
        if focused == "swap-go":  # the dialog's own target: this dialog showed its diff
            assert ctrl.busy == "swap" or app.model.profile_state != "serving"
            return
        # a variant opens its own confirm, Cancel closes, the scrolled text takes no Enter: nothing started
        assert ctrl.busy is None and app.model.profile == "ep8-tuned", focused
        if isinstance(app.screen, SwapConfirm):  # a confirm on screen shows what it would change
            assert "enable_eplb" in screen_text(app), focused
