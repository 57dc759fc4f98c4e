"""The footer at every size: help and quit always shown, no key cut, the palette's key last (issue 32)."""

from __future__ import annotations

import pytest

from kimitui.tui.app import KimituiApp
from tests.support.fakecontrol import FakeController
from tests.support.screen_states import drawn
from tests.support.tuiscreen import screen_text
from tests.test_tui_levels_table import sweep_events


@pytest.mark.parametrize("size", [(200, 55), (120, 40), (80, 24)])
async def test_help_and_quit_are_in_the_footer_at_every_size(size: tuple[int, int]) -> None:
    app = KimituiApp(FakeController(initial=sweep_events("plain")), tick=None)
    async with app.run_test(size=size) as pilot:
        await drawn(pilot)
        footer = screen_text(app).rstrip().split("\n")[-1]
        assert "? help" in footer and "q quit" in footer, (size, footer)
        assert footer.rstrip().endswith("^p palette"), (size, footer)
        words = footer.replace("▏", " ").split()
        assert "palett" not in words and "s" != words[-1], (size, footer)  # nothing cut at the edge
