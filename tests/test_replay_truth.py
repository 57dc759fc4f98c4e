"""A replay tells the truth (issue 32): a seek shows exactly the moment it names, the end says "end", and a fast
replay does not bury the screen under toasts.

The recording is the seeds' EPLB sweep as a host sends it (``tests/support/storypair.py``: 8 levels, 16 stalled
requests a level, the rebalance lines of every rank, GPU samples), with ``/metrics`` scraped 560 times a second:
a seek's rebuild is then more events than the cockpit's subscription holds (20,000), as in a long session.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kimitui.events import Event, LevelResult, LevelStarted, LogLine, ServerStats
from kimitui.recording import write_recording
from kimitui.replay import ReplayController
from kimitui.tui.app import KimituiApp
from kimitui.tui.model.fold import Notice
from kimitui.tui.widgets.level_table import LevelTable
from kimitui.tui.widgets.replay_bar import ReplayBar, ReplayToasts
from tests.support.storypair import T0, sweep
from tests.support.tuiscreen import screen_text, settle

pytestmark = pytest.mark.timeout(120)

SCRAPES = 40_000
"""/metrics samples over the sweep: more than the subscription's 20,000 fall inside one seek's history window."""


def dense_recording(tmp_path: Path) -> tuple[Path, list[Event]]:
    events = sweep("s2", "ep8-eplb", T0, eplb=True)
    span = events[-1].t - events[0].t
    stats = [ServerStats(t=T0 + span * i / SCRAPES, host="sim", running_reqs=float(i % 256))
             for i in range(SCRAPES)]
    ordered = sorted(events + stats, key=lambda e: e.t)
    return write_recording(tmp_path / "dense.jsonl", ordered), ordered


def truth(events: list[Event], t: float) -> dict[str, object]:
    """What the screen must show at ``t``: the levels done, the level running, the newest log line's second (as the
    log shows it: the ranks' copies of a line, 1 ms apart, are one entry)."""
    done = [e.concurrency for e in events if isinstance(e, LevelResult) and e.t <= t]
    started = [e.concurrency for e in events if isinstance(e, LevelStarted) and e.t <= t]
    logs = [e.t for e in events if isinstance(e, LogLine) and e.t <= t]
    return {"done": done, "running": started[-1] if started else None, "last_log": int(max(logs)) if logs else None}


def shown(app: KimituiApp) -> dict[str, object]:
    sw = app.model.sweep
    entries = list(app.model.logs)
    return {"done": [lv.concurrency for lv in sw.levels] if sw else [],
            "running": sw.concurrency if sw else None,
            "last_log": int(max(e.t for e in entries)) if entries else None}


def panels(app: KimituiApp) -> dict[str, object]:
    """What the panels hold, beyond the truth's three figures: compared between a seek and a fresh open."""
    m, sw = app.model, app.model.sweep
    return {**shown(app), "stragglers": [s.request_id for s in sw.stragglers] if sw else [],
            "log": [(e.t, e.text) for e in m.logs], "rows": app.query_one(LevelTable).row_count,
            "gpus": {i: g.reading.util_pct if g.reading else None for i, g in m.gpus.items()},
            "running_reqs": m.server.get("running_reqs"), "dropped": m.dropped}


async def opened_at(path: Path, t: float) -> dict[str, object]:
    """A fresh replay opened ``--at t --paused``: its panels."""
    ctrl = ReplayController(path, start_paused=True, start_at=t)
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(200, 55)) as pilot:
        await settle(app, pilot, rounds=3)
        return panels(app)


async def test_a_seek_back_shows_exactly_what_opening_at_that_moment_shows(tmp_path: Path) -> None:
    path, events = dense_recording(tmp_path)
    starts = [e.t for e in events if isinstance(e, LevelStarted)]
    at = starts[6] + 2.5  # C=192 running, six levels done
    ctrl = ReplayController(path, start_paused=True, start_at=at)
    app = KimituiApp(ctrl, tick=None)
    seen: list[tuple[float, dict[str, object]]] = []
    async with app.run_test(size=(200, 55), notifications=True) as pilot:
        await settle(app, pilot, rounds=3)
        assert shown(app) == truth(events, at)
        for key in ("J", "left_square_bracket"):  # a straggler back, then 30 s back (three levels)
            before = ctrl.position
            await pilot.press(key)
            await settle(app, pilot, rounds=3)
            assert ctrl.position < before
            assert shown(app) == truth(events, ctrl.position), f"after {key} at {ctrl.position}"
            seen.append((ctrl.position, panels(app)))
    for t, after_seek in seen:
        assert after_seek == await opened_at(path, t), f"a seek to {t} and --at {t} differ"


async def test_the_end_of_a_recording_says_end_not_playing(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "s.jsonl", sweep("s1", "ep8-tuned", T0, eplb=False))
    ctrl = ReplayController(path, speed=None)
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.wait_for(ctrl.replayer.wait(), 20)
        await settle(app, pilot)
        text = screen_text(app)
        assert "■ end" in text and "▶ playing" not in text
        await pilot.press("space", "left_square_bracket")  # paused, 30 s back into the recording: no longer the end
        await settle(app, pilot)
        assert app.query_one(ReplayBar).finished is False and "⏸ paused" in screen_text(app)


async def test_j_past_the_last_straggler_says_so(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "s.jsonl", sweep("s2", "ep8-eplb", T0, eplb=True))
    ctrl = ReplayController(path, speed=None)
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await asyncio.wait_for(ctrl.replayer.wait(), 20)
        await settle(app, pilot)
        await pilot.press("j")
        await settle(app, pilot)
        assert [n.message for n in app._notifications][-1] == "no later straggler"


async def test_at_max_speed_one_toast_at_a_time_and_the_log_keeps_every_notice(tmp_path: Path) -> None:
    """Eight sweeps' 'completed' notices arrive within a tick or two: one toast stays, saying the log has the rest."""
    events: list[Event] = []
    for k in range(8):
        events += sweep(f"s{k}", "ep8-tuned", T0 + 100.0 * k, eplb=False)
    ctrl = ReplayController(write_recording(tmp_path / "many.jsonl", events), speed=None)
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(200, 55), notifications=True) as pilot:
        await asyncio.wait_for(ctrl.replayer.wait(), 30)
        await settle(app, pilot)
        assert len(app._notifications) <= 1
        completed = [e.text for e in app.model.logs if "completed" in e.text]
        assert len(completed) == 8


def test_a_fast_replay_toasts_one_notice_every_few_seconds_saying_how_many_the_log_holds() -> None:
    notices = [Notice("information", "a"), Notice("error", "b"), Notice("information", "c")]
    gate = ReplayToasts(gap_s=3.0)
    assert gate.take(notices, 1.0, True, now=0.0) == notices
    assert gate.take(notices, None, False, now=0.0) == notices  # paused: a seek's notices, each once
    assert gate.take(notices, None, True, now=0.0) == [Notice("error", "b (+2 more in the log)")]
    assert gate.take(notices, 100.0, True, now=1.0) == []  # the toast above still shows
    assert gate.take(notices[:1], 100.0, True, now=3.5) == [Notice("information", "a (+3 more in the log)")]
