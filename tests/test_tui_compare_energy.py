"""The compare view's J/token and cost per M tokens per level, with their verdicts (issue 34).

Two sweeps built by hand (``tests/test_energy_report.sweep``: 8 GPUs at a flat ``P`` watts each over every level):
B draws half as much again as A at the same throughput, so each level's J/token is 50 % higher on B.  The cockpit
folds them as it would live; its compare book keeps no GPU samples, so the energy must come from its folder.
"""

from __future__ import annotations

from rich.console import Console

from kimitui.analysis.cost import CostRates
from kimitui.events import Event
from kimitui.report.compare import Comparison, compare
from kimitui.report.verdict import VERDICT_WORDS
from kimitui.tui.app import KimituiApp
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.sweep_energy import j_text
from kimitui.tui.screens.compare import CompareScreen, level_table
from tests.support.fakecontrol import FakeController
from tests.support.tuiscreen import screen_text, settle, tick
from tests.test_energy_report import T0, sweep

A_LEVELS = {1: (10.0, 200.0, 0.020), 8: (10.0, 300.0, 0.022)}
B_LEVELS = {c: (d, w * 1.5, tpot) for c, (d, w, tpot) in A_LEVELS.items()}


def two_sweeps(*, b_gpus: bool = True) -> list[Event]:
    return [*sweep("ep8-tuned", A_LEVELS), *sweep("ep8-eplb", B_LEVELS, sweep_id="s2", t0=T0 + 300, gpus=b_gpus)]


def book_comparison(events: list[Event], rates: CostRates | None = None) -> Comparison:
    model = CockpitModel()
    model.sweep_state.energy.rates = rates
    model.apply(events)
    a, b = model.compare.runs(model.sweep_state.energy)
    return compare(a, b)


def text_of(table: object, width: int = 200) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def test_the_compare_table_carries_each_levels_j_per_token_with_the_verdict_compare_computes() -> None:
    cmp = book_comparison(two_sweeps())
    assert cmp.a.idle is not None and cmp.a.idle.mean_w == 800.0  # 8 GPUs idling at 100 W
    out = text_of(level_table(cmp))
    assert "J/tok A/B" in out
    for lv in cmp.levels:
        j = next(f for f in lv.figures if f.figure == "j_per_token")
        assert j.change_pct is not None and round(j.change_pct) == 50  # 1.5 x the power, the same tokens
        row = next(line for line in out.splitlines() if line.split() and line.split()[0] == str(lv.concurrency))
        assert f"{j_text(j.a)}/{j_text(j.b)}" in row
        assert f"+50 % {VERDICT_WORDS[j.verdict]}" in row
    by_c = {lv.concurrency: next(f for f in lv.figures if f.figure == "j_per_token") for lv in cmp.levels}
    assert by_c[8].verdict == "regressed"  # 50 % more J/token is worse, beyond noise: 8 requests at one pace
    assert by_c[1].verdict == "unsure"  # one request: no noise to measure, the view says so, not "worse"


def test_a_configured_price_gives_the_cost_column_and_its_verdict() -> None:
    cmp = book_comparison(two_sweeps(), CostRates(kwh=0.30))
    out = text_of(level_table(cmp))
    assert "cost/Mtok A/B" in out
    cost = next(f for f in cmp.levels[1].figures if f.figure == "cost_per_mtok")
    assert cost.concurrency == 8 and round(cost.change_pct or 0) == 50  # the energy's price alone
    assert cost.verdict == "regressed"
    row = next(line for line in out.splitlines() if line.split() and line.split()[0] == "8")
    assert row.count(f"+50 % {VERDICT_WORDS['regressed']}") == 2  # J/tok, then cost


def test_a_run_without_gpu_samples_says_no_energy() -> None:
    cmp = book_comparison(two_sweeps(b_gpus=False))
    out = text_of(level_table(cmp))
    rows = [line for line in out.splitlines()[1:] if line.strip()]
    assert len(rows) == 2 and all("no energy B" in row for row in rows)
    # the host's samples stopped before B: the line under the table says why, GPU by GPU
    assert any(line.startswith("energy per token (J/token): not judged: B: 8 of 8 GPUs short: GPU 0 covered 0 %")
               for line in cmp.summary_lines())


def test_at_80_columns_the_energy_columns_give_way_and_every_level_keeps_one_line() -> None:
    cmp = book_comparison(two_sweeps(), CostRates(kwh=0.30))
    out = text_of(level_table(cmp, 72), width=72)
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 3 and "J/tok" not in out  # header and one line per level; their lines say it below


async def compare_screen_text(events: list[Event]) -> str:
    """The cockpit's compare view (``c``) over these events, as text once its work is done."""
    app = KimituiApp(FakeController(initial=events), tick=None)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(app, pilot)
        await pilot.press("c")
        await tick(pilot)
        assert isinstance(app.screen, CompareScreen)
        await app.screen.workers.wait_for_complete()
        await tick(pilot)
        return screen_text(app)


async def test_the_compare_view_shows_the_j_per_token_verdict() -> None:
    text = await compare_screen_text(two_sweeps())
    assert "J/tok A/B" in text
    row = next(line for line in text.splitlines() if "6.00/9.00" in line)  # C=8: 6 J/token on A, 9 on B
    assert f"+50 % {VERDICT_WORDS['regressed']}" in row
    assert "energy per token (J/token), B vs A: C=1 +50 % (unsure), C=8 +50 % (worse)" in text


async def test_the_compare_view_says_when_neither_side_has_energy() -> None:
    events = [*sweep("ep8-tuned", A_LEVELS, gpus=False),
              *sweep("ep8-eplb", B_LEVELS, sweep_id="s2", t0=T0 + 300, gpus=False)]
    text = await compare_screen_text(events)
    assert "J/tok A/B" not in text
    assert "J/tok: no energy on either side (no GPU power samples cover their levels)" in text
