"""The per-request spread: x is tok/s per request (labelled, with its unit), y counts requests.

Issue 15: the old chart put every request at (seconds since sent, tok/s), so at C=64 all
in-flight requests sat on one dot and the x axis said nothing.  These tests read the
cells the chart puts on screen in a small app of its own (a panel the size the
cockpit gives it), so they check what an operator sees, colours included.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from rich.color import Color
from rich.style import Style
from textual.app import App, ComposeResult

from kimitui.events import (
    InFlight,
    LevelResult,
    LevelStarted,
    Percentiles,
    RequestResult,
    SweepProgress,
    SweepResult,
    SweepSpec,
    SweepStarted,
)
from kimitui.loadgen.sweep import compact_in_flight
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.spread_data import bin_points, spread_points
from kimitui.tui.widgets.panel import Panel
from kimitui.tui.widgets.spread_chart import SpreadChart, spread_text
from tests.support.fakecontrol import story_events

EIGHTHS = {" ": 0, "▁": 1, "▂": 2, "▃": 3, "▄": 4, "▅": 5, "▆": 6, "▇": 7, "█": 8}


class SpreadApp(App[None]):
    """Just the spread's panel, about the size the cockpit gives it (half the width, ~40 % of the height)."""

    CSS = "Panel { width: 50%; height: 42%; }"

    def __init__(self, model: CockpitModel) -> None:
        super().__init__()
        self.model = model

    def compose(self) -> ComposeResult:
        yield Panel(SpreadChart(self.model, id="spread"), title="Per-request tok/s (current level)", id="panel-spread")

    def on_mount(self) -> None:
        self.query_one(SpreadChart).redraw()


Cell = tuple[str, str]
"""(character, colour name): ``red``, ``yellow``, ``green``, ``cyan``, or ``other``."""

NAMED = ("red", "yellow", "green", "cyan")


def colour_name(style: Style | None, app: App[None]) -> str:
    """The ANSI name a cell's foreground was drawn from (Textual paints ANSI names in its theme's RGB)."""
    if style is None or style.color is None:
        return "other"
    rgb = style.color.get_truecolor(app.ansi_theme)
    for name in NAMED:
        if Color.parse(name).get_truecolor(app.ansi_theme) == rgb:
            return name
    return "other"


async def cells_of(model: CockpitModel, size: tuple[int, int] = (80, 24), shot: Path | None = None) -> list[list[Cell]]:
    """The spread's content region as rows of (character, colour name), read from the composed screen."""
    app = SpreadApp(model)
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.05)
        chart = app.query_one(SpreadChart)
        chart.redraw()
        await pilot.pause(0.05)
        if shot is not None:
            app.save_screenshot(filename=shot.name, path=str(shot.parent))
        region = chart.content_region
        strips = app.screen._compositor.render_strips()
        rows = []
        for y in range(region.y, region.bottom):
            row: list[Cell] = []
            for seg in strips[y].crop(region.x, region.right):
                row += [(ch, colour_name(seg.style, app)) for ch in seg.text]
            rows.append(row)
        return rows


def text(rows: list[list[Cell]]) -> list[str]:
    return ["".join(ch for ch, _ in row) for row in rows]


def is_red(colour: str) -> bool:
    return colour == "red"


def plot_of(rows: list[list[Cell]]) -> list[list[Cell]]:
    """The histogram's rows: those with a y-axis gutter (``┤`` or ``│``), not the legend lines or the axis."""
    return [row for row in rows if any(ch in "┤│" for ch, _ in row[:10])]


def bar_heights(rows: list[list[Cell]]) -> dict[int, int]:
    """Column -> the bar's height in eighths of a cell, over the plot rows (the legend and axis excluded)."""
    heights: dict[int, int] = {}
    for row in plot_of(rows):
        for x, (ch, _style) in enumerate(row):
            if ch in EIGHTHS and ch != " ":
                heights[x] = heights.get(x, 0) + EIGHTHS[ch]
    return heights


def at_level(c: int) -> CockpitModel:
    m = CockpitModel()
    spec = SweepSpec(url="http://x", model="m", levels=[c])
    m.apply([SweepStarted(sweep_id="s", spec=spec), LevelStarted(sweep_id="s", concurrency=c)])
    return m


def finished(rates: list[float], c: int = 64) -> list[RequestResult]:
    return [RequestResult(sweep_id="s", request_id=f"s-c{c}-r{i}", concurrency=c, ok=True, intended_send=0.0,
                          sent=0.0, ttft_s=0.1, e2e_s=5.0, completion_tokens=256, decode_tok_s=rate)
            for i, rate in enumerate(rates)]


def sixty_four_in_flight(same_rate: bool = False) -> SweepProgress:
    """C=64, all sent together 3 s ago, binned as the load process bins them: 16 listed, 48 in the cloud."""
    rng = random.Random(7)
    rows: list[tuple[str, float, int, float | None]] = [
        (f"s-c64-f{i}", 3.0, 33, 11.0 if same_rate else round(rng.uniform(9.0, 13.0), 2)) for i in range(64)]
    listed, cloud = compact_in_flight(rows)
    assert len(listed) == 16 and sum(n for _, _, n in cloud) == 48
    return SweepProgress(sweep_id="s", concurrency=64, in_flight=listed, running=64, level_elapsed_s=3.0,
                         level_tokens=64 * 33, cloud=cloud)


async def test_the_x_axis_is_labelled_with_its_unit_and_starts_at_zero():
    rows = text(await cells_of(story_model()))
    axis, labels = rows[-2], rows[-1]
    assert labels.rstrip().endswith(" tok/s"), labels
    assert labels.split()[0] == "0" and "10" in labels.split()  # ticks, in tok/s, from zero
    assert "└" in axis and "┬" in axis


async def test_64_in_flight_requests_sent_together_are_spread_out_not_one_dot():
    m = at_level(64)
    m.apply([sixty_four_in_flight()])
    assert sum(bin_points(spread_points(m.sweep), 34).counts["running"]) == 64  # the cloud counts as its requests
    rows = await cells_of(m)
    heights = bar_heights(rows)
    yellow = [(x, y) for y, row in enumerate(plot_of(rows)) for x, (ch, st) in enumerate(row)
              if ch in EIGHTHS and ch != " " and st == "yellow"]
    assert len({x for x, _ in yellow}) >= 3 and len(yellow) >= 10, text(rows)
    assert sum(heights.values()) >= 3 * 8  # bars, not a dot
    assert "run 64" in text(rows)[0] or "running 64" in text(rows)[0]


async def test_64_requests_at_one_rate_are_one_tall_bar_that_says_how_many():
    m = at_level(64)
    m.apply([sixty_four_in_flight(same_rate=True)])
    assert sum(bin_points(spread_points(m.sweep), 32).counts["running"]) == 64
    rows = await cells_of(m)
    heights, full = bar_heights(rows), 8 * len(plot_of(rows))
    assert len(heights) <= 3 and max(heights.values()) == full  # side by side, the tallest the plot's height
    top = int(text(plot_of(rows))[0].split("┤")[0])  # the y axis's top label: the tallest bar's requests
    drawn = sum(heights.values()) / full * top
    assert abs(drawn - 64) <= len(heights) * top / full  # the bars add up to the 64 requests (to an eighth each)


async def test_finished_requests_are_a_histogram_with_correct_bin_counts():
    m = at_level(64)
    rates = [10.0] * 20 + [5.0] * 10 + [12.0] * 5
    m.apply(finished(rates))
    bins = bin_points(spread_points(m.sweep), 40)
    by_col = {bins.column_of(r): bins.counts["done"][bins.column_of(r)] + bins.counts["done_slow"][bins.column_of(r)]
              for r in (10.0, 5.0, 12.0)}
    assert sorted(by_col.values()) == [5, 10, 20] and sum(bins.counts["done"]) + sum(bins.counts["done_slow"]) == 35
    rows = await cells_of(m, size=(120, 40))
    heights = sorted(bar_heights(rows).values())
    full = 8 * len(plot_of(rows))
    assert heights == [round(full * 5 / 20), round(full * 10 / 20), full]  # 5 : 10 : 20 requests
    assert text(plot_of(rows))[0].lstrip().startswith("20┤") and "req" in text(plot_of(rows))[1]


async def test_slow_requests_and_stragglers_are_red_at_the_left_of_the_median():
    m = at_level(64)
    m.apply(finished([11.0] * 30 + [3.0, 2.5]))
    m.apply([LevelResult(sweep_id="s", concurrency=64, requests=32, ok=32, wall_s=10.0, output_tokens=8192,
                         decode_tok_s=Percentiles(p50=11.0, p99=11.0), stragglers=[])])
    rows = await cells_of(m)
    plot = plot_of(rows)
    median_x = text(rows)[-2].index("▲")
    red_bars = {x for row in plot for x, (ch, st) in enumerate(row) if ch in EIGHTHS and ch != " " and is_red(st)}
    other_bars = {x for row in plot for x, (ch, st) in enumerate(row) if ch in EIGHTHS and ch != " " and not is_red(st)}
    assert red_bars and max(red_bars) < median_x / 2 + 1 < min(other_bars), text(rows)
    axis = rows[-2]
    assert is_red(axis[min(red_bars)][1]) and not is_red(axis[median_x + 1][1])  # the axis's slow zone is red
    assert "slow 2" in text(rows)[0]


async def test_a_straggler_at_a_normal_rate_is_red_in_its_column():
    m = at_level(8)
    m.apply(finished([11.0, 11.1, 11.2, 10.9, 11.0, 10.8, 11.3, 11.0], c=8))
    from kimitui.events import Straggler
    m.apply([LevelResult(sweep_id="s", concurrency=8, requests=8, ok=8, wall_s=10.0, output_tokens=2048,
                         decode_tok_s=Percentiles(p50=11.0, p99=11.3),
                         stragglers=[Straggler(request_id="s-c8-r1", concurrency=8, reason="stall gap 4 s")])])
    rows = await cells_of(m)
    assert any(is_red(st) for row in plot_of(rows) for ch, st in row if ch in EIGHTHS and ch != " "), text(rows)


async def test_before_any_sweep_the_chart_says_how_to_start_one():
    rows = text(await cells_of(CockpitModel()))
    assert any("no sweep yet (s starts one)" in r for r in rows)
    assert not any("└" in r or "┤" in r for r in rows)  # no empty 0..1 axes


def story_model() -> CockpitModel:
    m = CockpitModel()
    m.apply(story_events())
    return m


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_the_chart_fills_its_panel_at_each_terminal_size(size: tuple[int, int], tmp_path: Path):
    shot = tmp_path / f"spread-{size[0]}x{size[1]}.svg"
    rows = text(await cells_of(story_model(), size=size, shot=shot))
    assert "tok/s" in shot.read_text()  # the screenshot an operator would look at (rsvg-convert it to see)
    assert rows[0].startswith("C=64") and "slow 1" in rows[0] and "med" in rows[0]
    assert "tok/s" in rows[-1] and "└" in rows[-2]
    assert len(rows) == int(size[1] * 0.42) - 2  # every row of the content region is the chart's
    if size[0] >= 200:
        assert "per request" in rows[-1] and any(r.startswith("requests│") for r in rows)


def test_any_size_renders_within_its_region():
    m = story_model()
    m.apply([SweepProgress(sweep_id="s2", concurrency=64, running=64, in_flight=[], cloud=[(2.0, 9.5, 64)])])
    for sweep in (None, m.sweep):
        for width in (1, 5, 12, 30, 38, 97):
            for height in (1, 2, 3, 4, 8, 24):
                lines = spread_text(sweep, width, height).plain.split("\n")
                assert len(lines) <= height and all(len(line) <= width for line in lines), (width, height, lines)


def test_after_the_sweep_the_last_level_stays_as_a_distribution():
    m = at_level(64)
    m.apply(finished([10.0] * 8 + [11.0] * 8))
    m.apply([SweepResult(sweep_id="s", levels=[64], peak_tok_s=700.0)])
    lines = spread_text(m.sweep, 38, 8).plain.split("\n")
    assert lines[0].startswith("C=64 done 16") and "run" not in lines[0]
    assert lines[1].lstrip().startswith("8┤")  # 8 requests in each of two columns


async def test_a_resize_redraws_the_chart_to_the_new_width():
    app = SpreadApp(story_model())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.05)
        chart = app.query_one(SpreadChart)
        narrow = chart.content_region.width
        await pilot.resize_terminal(200, 60)
        await pilot.pause(0.1)
        region = chart.content_region
        assert region.width > narrow
        strips = app.screen._compositor.render_strips()
        axis = "".join(seg.text for seg in strips[region.bottom - 2].crop(region.x, region.right))
        assert axis.rstrip().endswith("─") and len(axis.strip()) >= region.width - 12  # the axis spans the new width


async def test_one_slow_request_among_thousands_still_shows_red():
    m = at_level(2048)
    rng = random.Random(3)
    m.apply(finished([rng.gauss(6.5, 0.3) for _ in range(900)] + [2.0], c=2048))
    rows = await cells_of(m, size=(120, 40))
    red = [x for row in plot_of(rows) for x, (ch, st) in enumerate(row) if ch in EIGHTHS and ch != " " and is_red(st)]
    assert len(red) == 1 and "slow 1" in text(rows)[0]


async def test_a_tall_panel_names_the_slowest_requests():
    rows = text(await cells_of(story_model(), size=(200, 60)))
    assert rows[1].startswith("slowest r5 3.1")  # s2-c64-r5: 3.1 tok/s against a median of 11
    m = at_level(64)
    m.apply(finished([11.0] * 20))
    rows = text(await cells_of(m, size=(200, 60)))
    assert rows[1].startswith("none slow (below 5.5 tok/s, half the median)")
