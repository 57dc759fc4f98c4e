"""The quit confirmation says what quitting does to the host's server (issue 13)."""

from __future__ import annotations

from kimitui.tui.app import KimituiApp
from kimitui.tui.screens.confirm import Confirm
from tests.support.fakecontrol import FakeController
from tests.support.tuiscreen import screen_text, settle, tick

RULE = ("The swap under way is finished or rolled back first (its progress stays on screen), then kimitui exits. "
        "The server on ct200 keeps running: quitting never stops a real host's server.")


class RuleController(FakeController):
    def quit_rule(self) -> str:
        return RULE


async def test_quit_during_a_swap_states_the_rule_for_this_host() -> None:
    ctrl = RuleController()
    app = KimituiApp(ctrl)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        ctrl._busy = "swap"
        await pilot.press("q")
        await tick(pilot)
        assert isinstance(app.screen, Confirm)
        text = " ".join(screen_text(app).split())
        assert "A swap is running. Quit anyway?" in text
        assert "finished or rolled back first" in text and "never stops a real host's server" in text, text
        await pilot.press("n")
        await tick(pilot)
        assert app.is_running and not ctrl.shut_down
        ctrl._busy = None


async def test_a_pump_tick_during_teardown_is_not_a_traceback() -> None:
    """A timer-driven pump that fires while the screen is being torn down finds no widgets: nothing to draw."""
    from kimitui.tui.app import KimituiApp
    from tests.support.fakecontrol import FakeController
    from tests.support.tuiscreen import settle

    app = KimituiApp(FakeController(), tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await app.screen.query_one("#header").remove()  # the widgets go first when the screen is torn down
        app._closing = True  # what App sets once it starts shutting down
        try:
            assert app.pump(force_charts=True) == set()
        finally:
            app._closing = False  # let the test harness shut the app down itself
