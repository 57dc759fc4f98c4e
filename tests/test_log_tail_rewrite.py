"""A progress bar's redraws update its one log line on screen too (issue 32: the line kept its first redraw)."""

from __future__ import annotations

import pytest

from kimitui.events import LogLine
from kimitui.tui.app import KimituiApp
from kimitui.tui.widgets.log_panel import LogPanel, TailLog
from tests.support.fakecontrol import T0, FakeController
from tests.support.screen_states import drawn
from tests.support.tuiscreen import screen_text, settle


def _shards(t: float, done: int, rank: int) -> LogLine:
    raw = (f"[2026-12-06 10:21:{done:02d} TP{rank} EP{rank}] Loading safetensors checkpoint shards: "
           f"{done * 100 // 64}% Completed | {done}/64 [00:02<00:03, 10.52it/s]")
    return LogLine(t=t, raw=raw, line_kind="startup", severity="info")


def _capture(t: float, done: int) -> LogLine:
    raw = f"Capturing batches (bs={64 - done} avail_mem=9.80 GB):  {done * 100 // 52}%|###  | {done}/52 [00:01<00:09]"
    return LogLine(t=t, raw=raw, line_kind="startup", severity="info")


@pytest.mark.parametrize("size", [(200, 55), (120, 40), (80, 24)])
async def test_the_bar_line_on_screen_follows_its_redraws(size: tuple[int, int]) -> None:
    ctl = FakeController()
    app = KimituiApp(ctl, tick=None)
    async with app.run_test(size=size) as pilot:
        await drawn(pilot)
        for n, done in enumerate((8, 32, 64)):
            ctl.session.publish_many([_shards(T0 + 10 + n, done, rank) for rank in range(8)])
            await settle(app, pilot, rounds=3)
        panel = app.query_one(LogPanel)
        log = panel.query_one(TailLog)
        shown = [line for line in log.lines if "checkpoint shards" in line]
        assert len(shown) == 1 and "64/64" in shown[0] and "TP0–7" in shown[0], shown
        for n, done in enumerate((1, 26, 52)):
            ctl.session.publish(_capture(T0 + 20 + n, done))
            await settle(app, pilot, rounds=3)
        shown = [line for line in log.lines if "Capturing" in line]
        assert shown == [shown[0]] and "52/52" in shown[0], shown
        await settle(app, pilot)
        text = screen_text(app)
        assert "8/64" not in text and "1/52" not in text, text
