"""The main screen with the fixed story (two sizes) and the swap dialog, as SVG snapshots.

Update after an intended visual change with ``pytest tests/test_tui_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import time

import pytest

from kimitui.tui.app import KimituiApp
from tests.support.fakecontrol import StoryController


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Clock columns render in local time: pin it so the SVGs match anywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.delenv("TZ", raising=False)
    time.tzset()


def story_app() -> KimituiApp:
    return KimituiApp(StoryController(), tick=None)


async def _drawn(pilot) -> None:
    app = pilot.app
    await app.workers.wait_for_complete()
    await pilot.pause(0.05)
    app.pump(force_charts=True)
    await pilot.pause(0.05)
    app.pump(force_charts=True)
    app.clear_notifications()
    await pilot.pause(0.05)


@pytest.mark.parametrize("size", [(120, 40), (200, 60)], ids=["120x40", "200x60"])
def test_main_screen(snap_compare, size):
    assert snap_compare(story_app(), terminal_size=size, run_before=_drawn)


def test_confounded_swap_dialog(snap_compare):
    async def run_before(pilot) -> None:
        await _drawn(pilot)
        await pilot.press("2")
        await pilot.pause(0.05)

    assert snap_compare(story_app(), terminal_size=(120, 40), run_before=run_before)


def test_compare_view_seed_case_with_a_failed_and_a_distorted_level(snap_compare):
    """Tuned EP8 (eight levels) vs EPLB (1, 8, 64, 256) whose C=256 failed and whose C=64 the client distorted."""
    from kimitui.events import ConnectionState, ProfileState
    from tests.support.fakecontrol import T0, FakeController, caps
    from tests.support.seedcase import eplb_events, tuned_events

    initial = [ConnectionState(t=T0, state="connected"), caps(T0),
               ProfileState(t=T0, profile="ep8-tuned", state="serving"), *tuned_events(),
               *eplb_events(status={256: ("failed", "256/256 failed", None)}, distorted={64: "loop lag 730 ms"})]

    async def run_before(pilot) -> None:
        await _drawn(pilot)
        await pilot.press("c")
        await pilot.pause(0.05)
        await pilot.app.screen.workers.wait_for_complete()
        await pilot.pause(0.05)

    assert snap_compare(KimituiApp(FakeController(initial=initial), tick=None), terminal_size=(120, 40),
                        run_before=run_before)


def test_keys_dimmed_during_a_swap(snap_compare):
    """Issue 13: while a swap runs, 1-9, s and b are grey in the footer (the header shows the swap)."""
    ctrl = StoryController()
    ctrl.swap_gate.clear()

    async def run_before(pilot) -> None:
        await _drawn(pilot)
        await pilot.press("1")
        await pilot.pause(0.05)
        await pilot.click("#swap-go")
        for _ in range(5):  # the swap worker waits on the gate: draw without waiting for workers
            await pilot.pause(0.02)
        pilot.app.pump(force_charts=True)
        await pilot.pause(0.05)
        pilot.app.clear_notifications()
        await pilot.pause(0.05)

    assert snap_compare(KimituiApp(ctrl, tick=None), terminal_size=(120, 40), run_before=run_before)


def test_stop_sweep_question(snap_compare):
    """Issue 13: s during a sweep asks first; the focused answer is the coloured one."""
    ctrl = StoryController()

    async def run_before(pilot) -> None:
        await _drawn(pilot)
        ctrl._busy = "sweep"
        await pilot.press("s")
        await pilot.pause(0.05)

    assert snap_compare(KimituiApp(ctrl, tick=None), terminal_size=(120, 40), run_before=run_before)
