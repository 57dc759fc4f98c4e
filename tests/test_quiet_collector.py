"""Full garbage collections run between key presses, not in the middle of one (issue 33).

A full collection of the cockpit's heap under the firehose took ~55 ms (up to 180 ms with both cores busy) and
came by itself every few seconds: a key pressed then waited for it.  The cockpit takes the third generation off
its automatic trigger while it runs and collects it itself when a minute has passed and no key came lately.
"""

from __future__ import annotations

import gc

from kimitui.tui.app import KimituiApp
from kimitui.tui.quiet_collector import FULL_OFF, QuietCollector
from tests.support.fakecontrol import FakeController


def test_full_collections_wait_for_their_period_and_for_a_pause_in_the_keys() -> None:
    before = gc.get_threshold()
    qc = QuietCollector(period_s=60, quiet_s=1, longest_s=180)
    qc.start()
    try:
        assert gc.get_threshold() == (before[0], before[1], FULL_OFF)
        t0 = qc.last_full
        assert not qc.tick(now=t0 + 30)  # not due yet
        qc.key(now=t0 + 60.5)
        assert not qc.tick(now=t0 + 61)  # due, but a key came half a second ago
        assert qc.tick(now=t0 + 62) and qc.collections == 1  # the operator paused
        t1 = qc.last_full
        for s in range(1, 200):  # keys every second, forever: it still runs once the longest wait has passed
            qc.key(now=t1 + s)
            if qc.tick(now=t1 + s + 0.2):
                break
        assert qc.collections == 2 and s >= 180
    finally:
        qc.stop()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    assert not qc.tick(now=1e12)  # stopped: it collects nothing


async def test_the_cockpit_owns_full_collections_while_it_runs_and_hands_them_back() -> None:
    before = gc.get_threshold()
    app = KimituiApp(FakeController(), tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        while not app.started:
            await pilot.pause(0.05)
        assert gc.get_threshold()[2] == FULL_OFF and gc.get_freeze_count() > 0
        last = app.collector.last_key
        await pilot.press("p")
        assert app.collector.last_key > last  # a key delays the next full collection
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
