"""Issue 32: after an 8-level sweep the "Levels & stragglers" panel shows every level's row (C=1 .. C=256)
and its decode column, at 200x55, 120x40 and 80x24, in the plain, EPLB and DFlash layouts (at 80x24 the GPUs
and the server shrink to one line each, the bottom row holds the 8 levels and their header); the running
level reads ``▶ 64`` with ``running`` on its row at every size.

Before, the table stopped at 12 rows of a panel it shared with the straggler list (C=1 or C=256 scrolled
out), the EPLB and DFlash columns pushed ``decode p50/99`` off the panel, and ``1327.2/135`` wasted room;
80x24 showed 2 to 4 levels; the running level read ``64…`` (a figure cut?) with no word beside it.
"""

from __future__ import annotations

import pytest

from kimitui.events import (Event, LevelResult, LevelStarted, Percentiles, ServerInfo, SweepProgress, SweepResult,
                            SweepStarted)
from kimitui.tui.app import KimituiApp
from kimitui.tui.widgets.level_table import COLUMNS, LevelTable, visible_columns
from tests.support.fakecontrol import T0, TUNED, FakeController, level, spec, straggler
from tests.support.screen_states import DFLASH_ARGS, EPLB_ARGS, _log, drawn, serving_events, spec_sweep_events

LEVELS = [c for c, _, _ in TUNED]
SIZES = [(200, 55), (120, 40), (80, 24)]
ACCEPT = {1: 5.62, 8: 5.10, 32: 4.21, 64: 3.37, 96: 2.70, 128: 1.93, 192: 1.60, 256: 1.45}


def _dflash(lv: LevelResult) -> LevelResult:
    acc = ACCEPT[lv.concurrency]
    return lv.model_copy(update={"spec_accept_len": Percentiles(p50=acc, p90=acc * 1.1, p99=acc * 1.2, mean=acc),
                                 "spec_accept_len_level": acc, "spec_requests": lv.requests})


def sweep_events(layout: str) -> list[Event]:
    """A finished 8-level sweep (ep8-tuned's figures, a straggler at C=1); ``eplb``: an EPLB rebalance in
    every level (the EPLB column); ``dflash``: accept lengths (the speculative columns) and rebalances too."""
    ev = serving_events(minutes=1)
    if layout != "plain":
        ev.append(ServerInfo(t=T0 + 65, url="http://127.0.0.1:30000", args=EPLB_ARGS if layout == "eplb" else
                             {**DFLASH_ARGS, **EPLB_ARGS}))
    ev.append(SweepStarted(t=T0 + 70, sweep_id="s1", spec=spec(LEVELS), profile="ep8-tuned"))
    t = T0 + 70
    for c, agg, steady in TUNED:
        ev.append(LevelStarted(t=t, sweep_id="s1", concurrency=c))
        if layout != "plain":
            ev += [_log(t + 1, "10:22:01", "[EPLBManager] rebalance start"),
                   _log(t + 2.8, "10:22:03", "[EPLBManager] rebalance end time=1.80 s")]
        t += 10
        lv = level("s1", c, agg, steady, t, stragglers=[straggler("s1")] if c == 1 else None)
        ev.append(_dflash(lv) if layout == "dflash" else lv)
    ev.append(SweepResult(t=t + 1, sweep_id="s1", levels=LEVELS, peak_tok_s=1538.0))
    return ev


def table_lines(app: KimituiApp) -> list[str]:
    """What the screen shows of the levels table: its region, clipped to the panel's, as text lines."""
    panel = app.query_one("#panel-sweep").region.shrink((1, 1, 1, 1))
    shown = app.query_one(LevelTable).region.intersection(panel)
    strips = app.screen._compositor.render_strips()
    return [strips[y].crop(shown.x, shown.right).text for y in range(shown.y, shown.bottom)]


@pytest.mark.parametrize("layout", ["plain", "eplb", "dflash"])
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_every_level_and_its_decode_column_are_on_screen(layout: str, size: tuple[int, int]) -> None:
    app = KimituiApp(FakeController(initial=sweep_events(layout)), tick=None)
    async with app.run_test(size=size) as pilot:
        await drawn(pilot)
        lines = table_lines(app)
        shown = "\n".join(lines)
        assert lines and "decode p50/99" in lines[0], shown
        decode = lines[0].index("decode p50/99")
        rows = [line.split() for line in lines[1:]]
        assert [int(r[0]) for r in rows if r] == LEVELS, shown
        assert lines[1][decode:].split()[0] == "66/78", shown  # C=1's decode p50/p99, whole
        assert lines[-1][decode:].split()[0] == "6.1/7.2", shown  # the peak's row, C=256


def running_events(layout: str) -> list[Event]:
    """The same sweep with C=1..64 done and C=96 running (a progress report 4 s into it)."""
    ev = sweep_events(layout)
    started = next(e for e in ev if isinstance(e, LevelStarted) and e.concurrency == 96)
    ev = ev[:ev.index(started) + 1]
    return [*ev, SweepProgress(t=started.t + 4, sweep_id="s1", concurrency=96, done=40, failed=0,
                               level_tokens=5600, level_elapsed_s=4.0)]


@pytest.mark.parametrize("layout", ["plain", "eplb"])
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_running_level_reads_as_running(layout: str, size: tuple[int, int]) -> None:
    """Seen: the running level's C read ``64…``, a figure that looked cut; its status column had yielded."""
    app = KimituiApp(FakeController(initial=running_events(layout)), tick=None)
    async with app.run_test(size=size) as pilot:
        await drawn(pilot)
        lines = table_lines(app)
        shown = "\n".join(lines)
        assert "decode p50/99" in lines[0], shown
        live = [line for line in lines if line.lstrip().startswith("▶ 96")]
        assert len(live) == 1 and "running" in live[0], shown
        assert [int(line.split()[0]) for line in lines[1:] if line.split() and line.split()[0].isdigit()] == \
            LEVELS[:4], shown
        assert "…" not in shown, shown


def test_a_narrow_panel_keeps_the_decode_column_and_drops_tpot_its_inverse_first() -> None:
    row = ("256", "ok", "1538", "1571", "256/512", "1m25s", "306/602ms", "163/210ms", "1327/135", "0", "", "")
    assert visible_columns(COLUMNS, [row], 200) == COLUMNS[:-1]  # no level has a why: no empty column
    assert visible_columns(COLUMNS, [row], 36) == ("C", "agg", "steady", "decode p50/99")  # all ok: status yields
    failed = (*row[:1], "failed", *row[2:-1], "256/256 failed")
    narrow = visible_columns(COLUMNS, [failed], 40)
    assert narrow[:2] == ("C", "status") and "decode p50/99" in narrow and "TPOT p50/99" not in narrow


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_running_level_says_running_where_its_status_column_has_no_room(size: tuple[int, int]) -> None:
    """A DFlash sweep running C=256 at 80x24 has no room for the status column beside the decode one (it read
    a bare ``▶ 256``): the running row's C cell says it, ``▶ 256 running``."""
    app = KimituiApp(FakeController(initial=spec_sweep_events()), tick=None)
    async with app.run_test(size=size) as pilot:
        await drawn(pilot)
        lines = table_lines(app)
        shown = "\n".join(lines)
        assert "decode p50/99" in lines[0], shown
        live = [line for line in lines if line.lstrip().startswith("▶ 256")]
        assert len(live) == 1 and "running" in live[0], shown
