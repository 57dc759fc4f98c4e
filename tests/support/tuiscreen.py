"""Read what a running Textual app shows, as plain text, for pilot assertions."""

from __future__ import annotations

import html
import re
from typing import Any

_TEXT = re.compile(r"<text[^>]*>(.*?)</text>", re.S)


def screen_text(app: Any) -> str:
    """All text on the current screen (modals included), spaces normalised."""
    svg = app.export_screenshot()
    return html.unescape("".join(_TEXT.findall(svg))).replace("\xa0", " ")


async def tick(pilot: Any) -> None:
    """Let queued messages run.  A short fixed sleep: ``pause()`` waits for CPU idle, which a
    shared, busy machine rarely grants (up to 1 s per call)."""
    await pilot.pause(0.03)


async def settle(app: Any, pilot: Any, rounds: int = 2) -> None:
    """Let workers finish and the app fold and draw everything published so far."""
    for _ in range(rounds):
        await app.workers.wait_for_complete()
        await tick(pilot)
        app.pump(force_charts=True)
        await tick(pilot)
