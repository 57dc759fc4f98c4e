"""Driving the live cockpit on the embedded simulated host as an operator would, for Pilot tests and for
tests/support/story_shots.py: wait for a profile to serve, mark the baseline, open a swap's dialog, run a
short sweep from the form."""

from __future__ import annotations

from textual.pilot import Pilot
from textual.widgets import Input

from kimitui.tui.app import KimituiApp
from kimitui.tui.screens.swap_confirm import SwapConfirm
from kimitui.tui.screens.sweep_form import SweepForm
from tests.support.tuiscreen import settle, tick, wait_for


async def serving(app: KimituiApp, profile: str, timeout: float = 90) -> None:
    await wait_for(app, lambda: app.model.profile == profile and app.model.profile_state == "serving", timeout,
                   f"{profile} to serve")


async def serving_with_baseline(app: KimituiApp, pilot: Pilot[int], profile: str = "ep8-tuned",
                                timeout: float = 90) -> None:
    """``profile`` serves and is marked the known-good one (``b``)."""
    await serving(app, profile, timeout)
    await pilot.press("b")
    await wait_for(app, lambda: app.model.baseline == profile, 10, "the baseline mark")


async def swap_dialog(app: KimituiApp, pilot: Pilot[int], key: str) -> SwapConfirm:
    """The swap's dialog that a profile key opens, drawn."""
    await pilot.press(key)
    await wait_for(app, lambda: isinstance(app.screen, SwapConfirm), 10, f"the swap dialog of key {key}")
    await settle(app, pilot)
    assert isinstance(app.screen, SwapConfirm)
    return app.screen


async def swap(app: KimituiApp, pilot: Pilot[int], key: str, profile: str, timeout: float = 90) -> None:
    """A profile key, its confirm, until the profile serves."""
    await swap_dialog(app, pilot, key)
    await pilot.press("y")
    await serving(app, profile, timeout)


async def sweep(app: KimituiApp, pilot: Pilot[int], levels: str = "1", max_tokens: int = 64,
                timeout: float = 90) -> None:
    """A sweep of the running profile from the form (``levels``, ``max_tokens``), to its end."""
    before = app.model.sweep.sweep_id if app.model.sweep is not None else None
    await pilot.press("s")
    await wait_for(app, lambda: isinstance(app.screen, SweepForm), 10, "the sweep form")
    app.screen.query_one("#sweep-max-tokens", Input).value = str(max_tokens)
    field = app.screen.query_one("#sweep-levels", Input)
    field.value = levels
    field.focus()
    await tick(pilot)
    await pilot.press("enter")
    await wait_for(app, lambda: app.model.sweep is not None and app.model.sweep.sweep_id != before
                   and app.model.sweep.outcome is not None, timeout, "the sweep to end")
    # its outcome is on screen before its worker process has exited; until then the controller is still busy
    # with it and a profile key says "a sweep is running" (one CI run on a busy box pressed one in that window)
    await wait_for(app, lambda: app.controller.busy is None, timeout, "the sweep's worker to exit")
