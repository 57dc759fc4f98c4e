"""No key, at any speed, ends the session (issue 30).

The pinned races first (each crashed the cockpit before its fix), then the storms: random keys 10-50 ms apart
(every binding, palette commands, Escape, Tab, Enter) over a live simulated host, a fleet of two simulated
hosts and a replay at maximum speed, each followed by Escape until the main screen is back.  A failure names
its seed; ``KIMITUI_CHAOS_SEED=<seed>`` reruns that storm, ``KIMITUI_CHAOS_KEYS=<n>`` makes each storm longer.
"""

from __future__ import annotations

import pytest
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot

from kimitui.tui.screens.confirm import Confirm
from kimitui.tui.screens.help import HelpScreen
from kimitui.tui.widgets.header_bar import HeaderBar
from tests.support.fakecontrol import StoryController
from tests.support.keystorm import ChaosApp, alive, close_every_screen, storm_press
from tests.support.tuiscreen import tick
from tests.test_tui_fleet import FakeFleet


async def test_a_tick_during_the_rebuild_for_another_host_draws_nothing_and_the_rebuild_draws_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``o`` rebuilds the screen around the next host; the pump is a timer, so a tick can land between the old
    widgets' removal and the new ones' mount (``o``, ``O``, ``o`` half a second apart did, 2 runs in 3)."""
    app = ChaosApp(FakeFleet(), tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await tick(pilot)
        app.pump(force_charts=True)
        main = app.screen
        mount_all = main.mount_all
        ticks: list[set[str]] = []

        def a_tick_first(*args: object, **kwargs: object) -> object:
            ticks.append(set(app.pump(force_charts=True)))  # the old widgets are gone, the new not yet mounted
            return mount_all(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(main, "mount_all", a_tick_first)
        await pilot.press("o")
        await tick(pilot)
        alive(app, "o with a tick inside the rebuild")
        assert ticks == [set()], "a tick inside the rebuild must draw nothing (the widgets are being replaced)"
        assert app.fleet.focused == "gpu-b"
        assert "pd-1p1d" in str(app.query_one(HeaderBar).render())  # the rebuild drew the new host at once


async def _palette_listing(app: ChaosApp, pilot: Pilot[int], typed: str) -> None:
    """ctrl+p, type ``typed``, wait until the palette lists what matches and highlight the first entry."""
    await pilot.press("ctrl+p", *typed)
    for _ in range(100):
        await tick(pilot)
        if isinstance(app.screen, CommandPalette) and app.screen.query_one(CommandList).option_count:
            break
    await pilot.press("down")
    assert isinstance(app.screen, CommandPalette) and app.screen.query_one(CommandList).highlighted is not None


async def test_two_quick_enters_in_the_palette_run_the_command_and_close_the_palette_once() -> None:
    """The first Enter runs the command and closes the palette; the second reached the closing palette and
    closed it again, popping the main screen (``ScreenStackError``, replay storm seed 2)."""
    app = ChaosApp(StoryController(), tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await tick(pilot)
        await _palette_listing(app, pilot, "Show the keys")
        storm_press(app, "enter", "enter")  # back to back, as a terminal delivers a double press
        for _ in range(20):
            await tick(pilot)
        alive(app, "two Enters in the palette")
        assert isinstance(app.screen, HelpScreen)
        await close_every_screen(app, "two Enters in the palette")


async def test_a_dialog_closed_twice_closes_once_and_answers_once() -> None:
    """Enter on a dialog's button and Escape in quick succession both close it: the second close must not pop
    the screen below (the main screen: the session ended) nor answer a second time."""
    app = ChaosApp(StoryController(), tick=None)
    answers: list[bool | None] = []
    async with app.run_test(size=(160, 50)) as pilot:
        await tick(pilot)
        app.push_screen(HelpScreen([], {}, ""))
        await tick(pilot)
        confirm = Confirm("Stop the sweep?")
        app.push_screen(confirm, answers.append)
        await tick(pilot)
        confirm.dismiss(True)
        confirm.dismiss(False)  # the second closing key, a moment later
        await tick(pilot)
        alive(app, "a dialog closed twice")
        assert answers == [True] and isinstance(app.screen, HelpScreen)


async def test_ctrl_p_while_the_palette_is_still_closing_opens_it_once_the_old_one_is_gone() -> None:
    """A closed palette leaves the screen stack at once but the app's children only later; ctrl+p in between
    pushed a second palette under the same id (``DuplicateIds``: the session ended, live storm seed 1)."""
    app = ChaosApp(StoryController(), tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await tick(pilot)
        await pilot.press("ctrl+p")
        first = app.screen
        assert isinstance(first, CommandPalette)
        first.dismiss()
        app.action_command_palette()  # ctrl+p before the closed palette is removed
        for _ in range(20):
            await tick(pilot)
            if app.screen is not app.screen_stack[0]:
                break
        alive(app, "ctrl+p while the palette closes")
        assert isinstance(app.screen, CommandPalette) and app.screen is not first
        await close_every_screen(app, "ctrl+p while the palette closes")


async def test_a_key_that_reaches_the_palette_after_it_closed_searches_nothing() -> None:
    """Escape, ctrl+p and a letter at once: the palette opens, the Escape (bubbling up from the main screen)
    closes it, and the letter still reaches its input: the search it started found the palette's list gone
    (``NoMatches`` in a worker: the session ended, replay storm seed 5 and live storm seed 4)."""
    app = ChaosApp(StoryController(), tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await tick(pilot)
        for letter in "TSLC":
            storm_press(app, "escape", "ctrl+p", letter)
            for _ in range(30):
                await tick(pilot)
            alive(app, f"Escape, ctrl+p, {letter} at once")
            await close_every_screen(app, f"Escape, ctrl+p, {letter} at once")
