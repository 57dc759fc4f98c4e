"""Read what a running Textual app shows, as plain text, for pilot assertions."""

from __future__ import annotations

import asyncio
import html
import re
import time
from collections.abc import Callable

from textual.pilot import Pilot

from kimitui.tui.app import KimituiApp
from tests.support.fakecontrol import FakeController

_TEXT = re.compile(r"<text[^>]*>(.*?)</text>", re.S)


def screen_text(app: KimituiApp) -> str:
    """All text on the current screen (modals included), spaces normalised."""
    svg = app.export_screenshot()
    return html.unescape("".join(_TEXT.findall(svg))).replace("\xa0", " ")


async def tick(pilot: Pilot[int]) -> None:
    """Let queued messages run.  A short fixed sleep: ``pause()`` waits for CPU idle, which a
    shared, busy machine rarely grants (up to 1 s per call)."""
    await pilot.pause(0.03)


async def settle(app: KimituiApp, pilot: Pilot[int], rounds: int = 2) -> None:
    """Let workers finish and the app fold and draw everything published so far."""
    for _ in range(rounds):
        await app.workers.wait_for_complete()
        await tick(pilot)
        app.pump(force_charts=True)
        await tick(pilot)


async def wait_for(app: KimituiApp, pred: Callable[[], object], timeout: float, what: str) -> None:
    """Pump the app until ``pred()`` holds; on time-out say what was awaited and the log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        app.pump(force_charts=True)
        if pred():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; log tail: {[e.text for e in list(app.model.logs)[-8:]]}")


async def start_held_swap(app: KimituiApp, ctrl: FakeController, pilot: Pilot[int]) -> None:
    """Press ``3`` and confirm on a FakeController whose swap is held in its last phase (``swap_gate`` cleared)."""
    ctrl.swap_gate.clear()
    await pilot.press("3")
    await tick(pilot)
    await pilot.click("#swap-go")
    for _ in range(5):
        await tick(pilot)
    app.pump()
    await tick(pilot)
    assert ctrl.busy == "swap"
