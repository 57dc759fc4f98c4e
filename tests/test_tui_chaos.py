"""No key, at any speed, ends the session (issue 30).

The pinned races first (each crashed the cockpit before its fix), then the storms: random keys 10-50 ms apart
(every binding, palette commands, Escape, Tab, Enter) over a live simulated host, a fleet of two simulated
hosts and a replay at maximum speed, each followed by Escape until the main screen is back.  A failure names
its seed; ``KIMITUI_CHAOS_SEED=<seed>`` reruns that storm, ``KIMITUI_CHAOS_KEYS=<n>`` makes each storm longer.
"""

from __future__ import annotations

import pytest

from kimitui.tui.widgets.header_bar import HeaderBar
from tests.support.keystorm import ChaosApp, alive
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
