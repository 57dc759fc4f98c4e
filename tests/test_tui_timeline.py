"""The timeline strip under the curve (issue 15: "A timeline strip on the curve's time axis: EPLB
rebalances, swaps, markers, notes, errors, and the stragglers' gaps"): each mark at the right column,
level spans labelled by C, bounded state fed from the fold and cleared by a replay seek."""

from __future__ import annotations

from textual.app import App, ComposeResult

from kimitui.events import (
    ErrorEvent, LevelStarted, LogLine, Marker, Note, ProfileSwitch, ReplayState, Straggler, SwapProgress,
    SweepResult, SweepStarted,
)
from kimitui.sglang.log import to_event
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.timeline_marks import GLYPHS, MAX_MARKS, Timeline, column, kinds_shown, level_row, mark_row
from kimitui.tui.widgets.timeline_strip import TimelineStrip
from tests.support.fakecontrol import T0, level, spec, story_events

WIDTH = 100
"""One column per second: the sweep below runs 100 s."""


def eplb(t: float, text: str, rank: int) -> LogLine:
    """A rank's copy of an EPLB line, as the log parser makes it."""
    return to_event(f"[2026-12-01 10:00:00 TP{rank}] [EPLBManager] {text}", host="sim", source="test", t=t)


def sweep_story() -> list:
    c1 = level("s", 1, 60.0, 62.0, T0 + 40).model_copy(update={"wall_s": 40.0, "stragglers": [
        Straggler(request_id="r4", concurrency=1, max_gap_s=10.0, gap_start=T0 + 15, gap_end=T0 + 25)]})
    return [
        SweepStarted(t=T0, sweep_id="s", spec=spec([1, 8]), profile="p"),
        LevelStarted(t=T0, sweep_id="s", concurrency=1),
        *[eplb(T0 + 10, "rebalance start", r) for r in range(8)],  # every rank logs it
        *[eplb(T0 + 20 + r * 0.01, "rebalance end time=10.00s", r) for r in range(8)],
        c1,
        LevelStarted(t=T0 + 40, sweep_id="s", concurrency=8),
        SwapProgress(t=T0 + 50, profile="q", phase="stop", fraction=0.1),
        ProfileSwitch(t=T0 + 55, from_profile="p", to_profile="q", outcome="ok", phases={"stop": 5.0, "total": 5.0}),
        Marker(t=T0 + 60, label="m1"),
        Note(t=T0 + 70, text="looked at it"),
        ErrorEvent(t=T0 + 80, source="metrics", message="connection refused"),
        ErrorEvent(t=T0 + 85, source="metrics", message="no gauges", severity="info"),
        level("s", 8, 400.0, 420.0, T0 + 99).model_copy(update={"wall_s": 59.0}),
        SweepResult(t=T0 + 100, sweep_id="s", levels=[1, 8]),
    ]


def strip(tl: Timeline, width: int = WIDTH) -> tuple[str, str, list[str]]:
    win = tl.window()
    assert win is not None
    top = "".join(ch for ch, _ in level_row(tl, *win, width))
    cells = mark_row(tl, *win, width)
    return top, "".join(ch for ch, _ in cells), [style for _, style in cells]


def test_each_mark_sits_at_its_time_column():
    tl = Timeline()
    for ev in sweep_story():
        tl.add(ev)
    assert tl.window() == (T0, T0 + 100)
    top, marks, styles = strip(tl)
    assert top.startswith("│C=1") and top[40:44] == "│C=8"
    g = {kind: glyph for kind, (glyph, _, _) in GLYPHS.items()}
    assert marks[10:21] == g["eplb"] * 11  # the rebalance: 10 s from its start to its end
    assert all("on red3" in s for s in styles[15:21])  # the straggler's gap over it: both visible
    assert marks[21:26] == g["straggler"] * 5 and "red" in styles[22]  # the gap's rest, red
    assert marks[50:56] == g["swap"] * 6
    assert marks[60] == g["marker"] and marks[70] == g["note"] and marks[80] == g["error"]
    assert marks[85] == " "  # an informational ErrorEvent is no error
    assert marks.count(g["eplb"]) == 11  # eight ranks' lines: one span
    assert kinds_shown(tl) == {"eplb", "straggler", "swap", "marker", "note", "error"}


def test_an_open_rebalance_runs_to_now_and_marks_are_bounded():
    tl = Timeline()
    tl.add(SweepStarted(t=T0, sweep_id="s", spec=spec([1]), profile="p"))
    tl.add(eplb(T0 + 50, "rebalance start", 0))
    tl.add(Marker(t=T0 + 100))
    _, marks, _ = strip(tl)
    assert marks[50:99].count("≡") == 49
    for k in range(3 * MAX_MARKS):
        tl.add(Note(t=T0 + 100 + k * 0.001, text=str(k)))
    assert len(tl.marks) == MAX_MARKS


def test_idle_shows_the_last_ten_minutes():
    tl = Timeline()
    tl.add(Note(t=T0, text="a"))
    tl.add(Marker(t=T0 + 600, label="b"))
    assert tl.window() == (T0, T0 + 600)
    assert column(T0 + 300, T0, T0 + 600, 60) == 30


def test_the_model_feeds_it_and_a_replay_seek_clears_it():
    m = CockpitModel(raise_errors=True)
    parts = m.apply(sweep_story())
    assert "timeline" in parts and len(m.timeline.marks) == 6 and len(m.timeline.levels) == 2
    m.apply([ReplayState(t=T0, position=T0, start=T0, end=T0 + 100, reset=True)])
    assert not m.timeline.marks and m.timeline.sweep_start is None


class StripApp(App[None]):
    def __init__(self, model: CockpitModel) -> None:
        super().__init__()
        self.model = model

    def compose(self) -> ComposeResult:
        yield TimelineStrip(self.model, id="timeline")


async def test_the_widget_draws_two_rows_at_any_width():
    m = CockpitModel(raise_errors=True)
    m.apply(story_events())
    for width in (38, 58, 96):
        app = StripApp(m)
        async with app.run_test(size=(width, 10)) as pilot:
            strip_widget = app.query_one(TimelineStrip)
            strip_widget.redraw()
            await pilot.pause(0.05)
            assert strip_widget.size.height == 2 and not strip_widget.can_focus
            rows = strip_widget.render().plain.split("\n")
            assert len(rows) == 2 and all(len(r) == width for r in rows)
            assert "≡" in rows[1] and "64" in rows[0]
            assert "EPLB rebalance" in str(strip_widget.tooltip)
