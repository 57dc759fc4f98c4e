"""The stragglers one key away, live (issue 32): ``j``/``J`` step through the straggler list, ``x`` opens the newest
one's gap, and the footer and help name them.

Live cockpit (FakeController, ``live=True``) fed the seeds' EPLB sweep as a host sends it (``tests/support/
storypair.py``): eight levels, sixteen stragglers a level.
"""

from __future__ import annotations

from kimitui.events import ConnectionState, Event, ProfileState
from kimitui.tui.app import KimituiApp
from kimitui.tui.screens.help import HelpScreen
from kimitui.tui.screens.straggler_detail import StragglerDetail
from kimitui.tui.widgets.straggler_list import StragglerList
from tests.support.fakecontrol import FakeController
from tests.support.storypair import T0, sweep
from tests.support.tuiscreen import screen_text, settle


def live_sweep() -> list[Event]:
    return [ConnectionState(t=T0, host="sim", state="connected"),
            ProfileState(t=T0, host="sim", profile="ep8-eplb", state="serving"),
            *sweep("s2", "ep8-eplb", T0, eplb=True)]


def highlighted(app: KimituiApp) -> str:
    """The request id of the straggler the list highlights."""
    table = app.query_one(StragglerList)
    return str(table.get_row_at(table.cursor_row)[6])


def toasts(app: KimituiApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_j_and_J_step_through_the_live_straggler_list_and_say_where_it_ends() -> None:
    app = KimituiApp(FakeController(initial=live_sweep()), tick=None)
    async with app.run_test(size=(200, 55), notifications=True) as pilot:
        await settle(app, pilot, rounds=3)
        sw = app.model.sweep
        assert sw is not None and len(sw.stragglers) == 128
        ids = [s.request_id[-12:] for s in sw.stragglers]
        table = app.query_one(StragglerList)
        assert app.focused is not table

        await pilot.press("j")  # from the log: to the list, on its first straggler
        await settle(app, pilot)
        assert app.focused is table and highlighted(app) == ids[0]
        await pilot.press("j", "j")
        await settle(app, pilot)
        assert highlighted(app) == ids[2]
        await pilot.press("J")
        await settle(app, pilot)
        assert highlighted(app) == ids[1]
        await pilot.press("J", "J")  # past the first
        await settle(app, pilot)
        assert highlighted(app) == ids[0] and toasts(app)[-1] == "no earlier straggler"

        await pilot.press("enter")  # the highlighted one opens
        await settle(app, pilot)
        assert isinstance(app.screen, StragglerDetail)
        assert app.screen.evidence.straggler.request_id == sw.stragglers[0].request_id
        await pilot.press("escape")
        await settle(app, pilot)


async def test_x_opens_the_newest_straggler_and_j_past_it_says_there_is_no_later_one() -> None:
    app = KimituiApp(FakeController(initial=live_sweep()), tick=None)
    async with app.run_test(size=(200, 55), notifications=True) as pilot:
        await settle(app, pilot, rounds=3)
        sw = app.model.sweep
        assert sw is not None
        await pilot.press("x")
        await settle(app, pilot)
        assert isinstance(app.screen, StragglerDetail)
        assert app.screen.evidence.straggler.request_id == sw.stragglers[-1].request_id
        await pilot.press("escape")
        await settle(app, pilot)
        assert highlighted(app) == sw.stragglers[-1].request_id[-12:]
        await pilot.press("j")
        await settle(app, pilot)
        assert toasts(app)[-1] == "no later straggler"


async def test_before_any_straggler_the_keys_say_so() -> None:
    app = KimituiApp(FakeController(), tick=None)
    async with app.run_test(size=(200, 55), notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("x")
        await settle(app, pilot)
        assert not isinstance(app.screen, StragglerDetail)
        await pilot.press("j")
        await settle(app, pilot)
        assert toasts(app)[-2:] == ["no straggler yet: they are listed as each level ends"] * 2


async def test_the_footer_names_the_straggler_keys_where_they_fit_and_help_always_does() -> None:
    for size, in_footer in (((200, 55), True), ((120, 40), False), ((80, 24), False)):
        app = KimituiApp(FakeController(initial=live_sweep()), tick=None)
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot, rounds=3)
            footer = screen_text(app).rstrip().split("\n")[-1]
            assert ("j next straggler" in footer and "x newest straggler" in footer) is in_footer, (size, footer)
            assert "palette" in footer and ("q quit" in footer or size[0] < 100), (size, footer)  # never cut for them
            if size == (120, 40):  # the log's keys give way once the list has the focus
                await pilot.press("j")
                await settle(app, pilot)
                footer = screen_text(app).rstrip().split("\n")[-1]
                assert "j next straggler" in footer and "x newest straggler" in footer and "palette" in footer
            await pilot.press("question_mark")
            await settle(app, pilot)
            assert isinstance(app.screen, HelpScreen)
            keys = {k: what for k, what in app.screen.keys}
            assert keys.get("j") == "next straggler" and keys.get("J") == "prev straggler"
            assert keys.get("x") == "newest straggler"


async def test_where_the_layout_hides_the_list_j_opens_the_straggler_it_steps_to() -> None:
    """After a swap the cockpit shows the monitor layout (no sweep panel): j still shows a straggler."""
    from kimitui.events import ProfileSwitch

    swapped = ProfileSwitch(t=T0 + 500.0, host="sim", from_profile="ep8-eplb", to_profile="ep8-tuned", outcome="ok")
    app = KimituiApp(FakeController(initial=[*live_sweep(), swapped]), tick=None)
    async with app.run_test(size=(200, 55), notifications=True) as pilot:
        await settle(app, pilot, rounds=3)
        assert app.layout_shown == "monitor" and not app.query_one(StragglerList).region.area
        await pilot.press("j")
        await settle(app, pilot)
        sw = app.model.sweep
        assert isinstance(app.screen, StragglerDetail) and sw is not None
        assert app.screen.evidence.straggler.request_id == sw.stragglers[0].request_id
