"""The cockpit's eight states at 80x24, 120x40 and 200x60, and two dialogs, as SVG snapshots.

Update after an intended visual change with ``pytest tests/test_tui_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import time

import pytest

from kimitui.tui.app import KimituiApp
from tests.support.fakecontrol import StoryController
from tests.support.screen_states import SIZES, STATES, ScreenState, drawn


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
    await drawn(pilot)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("state", STATES, ids=[s.name for s in STATES])
def test_screen_state(snap_compare, tmp_path, state: ScreenState, size):
    """Issue 15: idle, starting, sweeping, after a sweep, the confound dialog, a straggler, compare, replay."""
    async def run_before(pilot) -> None:
        await drawn(pilot)
        await state.steps(pilot)
        await drawn(pilot)

    assert snap_compare(KimituiApp(state.controller(tmp_path), tick=None), terminal_size=size, run_before=run_before)


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
