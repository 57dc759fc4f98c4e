"""What the load client can drive: the calibration on its own code path, the check of a plan against it
(the seeds' EP8 curve, the simulator's time scale), the line ``kimitui sweep`` says and the cockpit's form
shows, and the cost read off a finished level."""

from __future__ import annotations

import math

import pytest

from kimitui.events import ClientSummary, LevelResult, SweepSpec
from kimitui.loadgen.drive_budget import DRIVE_CORE_SHARE, ChunkCost, check_drive, cost_from_levels
from kimitui.loadgen.drive_calibrate import FULL_PATH_FACTOR, cached_calibration, calibrate
from kimitui.tui.screens.sweep_form import drive_warning

SEEDS = [1, 8, 32, 64, 96, 128, 192, 256]
COST = ChunkCost(40e-6, "calibrated")
"""40 us per chunk: 12,500 chunks/s in half a core."""


def test_the_calibration_measures_the_real_client_path_once() -> None:
    cost = calibrate()
    assert 0 < cost.cpu_s < 0.01 and cost.basis == "calibrated"
    assert cost.cpu_s >= FULL_PATH_FACTOR * 1e-7  # a parser that costs nothing did not run
    assert calibrate() is cost and cached_calibration() is cost


def test_a_real_host_at_the_seeds_rates_is_within_reach() -> None:
    check = check_drive(SEEDS, COST)  # ~1,600 chunks/s at C=256, real time
    assert not check.exceeds and check.line() is None and check.max_time_scale is None
    assert check.levels[-1].chunks_s == pytest.approx(65.0 * 256 ** 0.58, rel=0.01)
    assert check.max_concurrency == 256


def test_time_scale_20_exceeds_it_and_the_line_offers_what_it_can_drive() -> None:
    check = check_drive(SEEDS, COST, time_scale=20)
    budget = DRIVE_CORE_SHARE / COST.cpu_s
    assert check.max_chunks_s == pytest.approx(budget)
    assert check.over == tuple(lv.concurrency for lv in check.levels if lv.chunks_s > budget) and check.over[-1] == 256
    assert 1 not in check.over and 8 not in check.over
    top = max(lv.chunks_s for lv in check.levels) / 20  # real-time chunks/s of the top level
    assert check.max_time_scale == pytest.approx(budget / top)
    line = check.line()
    assert line is not None and "12,500 chunks/s" in line and "40 us of CPU per chunk, calibrated" in line
    assert f"time scale {math.floor(budget / top)} or lower" in line and "at time scale 20" in line
    assert f"levels up to C={check.max_concurrency} are within reach" in line
    # what it offers is within reach
    assert not check_drive(SEEDS, COST, time_scale=math.floor(budget / top)).exceeds
    assert not check_drive([check.max_concurrency], COST, time_scale=20).exceeds
    assert check_drive([check.max_concurrency + 1], COST, time_scale=20).exceeds


def test_a_rate_plan_is_bounded_by_its_arrivals() -> None:
    assert not check_drive([1024], COST, time_scale=50, rate_rps=10, tokens_per_request=64).exceeds  # 640/s
    assert check_drive([1024], COST, time_scale=50, rate_rps=1000, tokens_per_request=512).exceeds


def level(c: int, tokens: int, wall: float, cpu: float | None) -> LevelResult:
    return LevelResult(sweep_id="s", concurrency=c, requests=10, ok=10, wall_s=wall, output_tokens=tokens,
                       agg_tok_s=tokens / wall, client=ClientSummary(cpu_max_pct=cpu))


def test_a_finished_level_says_the_cost_from_its_busiest_rate() -> None:
    levels = [level(1, 300, 1.0, 5.0), level(64, 10_000, 1.0, 35.0), level(128, 5_000, 1.0, 30.0)]
    cost = cost_from_levels(levels)
    assert cost is not None and cost.cpu_s == pytest.approx(0.35 / 10_000) and cost.basis == "measured at C=64"
    assert cost_from_levels([level(1, 300, 1.0, 5.0)]) is None  # too few chunks to say anything per chunk
    assert cost_from_levels([level(8, 9_000, 1.0, None)]) is None


def test_the_sweep_form_warns_with_the_same_line() -> None:
    spec = SweepSpec(url="http://127.0.0.1:1", model="m", levels=SEEDS)
    line = check_drive(SEEDS, COST, time_scale=20, tokens_per_request=512).line()
    assert drive_warning(spec, COST, 20.0) == f"⚠ {line}"
    assert drive_warning(spec, COST, None) == "" and drive_warning(spec, None, 20.0) == ""


def test_kimitui_sweep_says_the_line_before_a_plan_beyond_the_client(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    from kimitui.commands.sweep import say_drive_limit
    from kimitui.events import ErrorEvent, Event
    from kimitui.session import Session
    from tests.support.simserver import start_sim

    path = tmp_path / "fast.toml"
    path.write_text('name = "fast"\nextends = "ep8-tuned"\n[sim]\nstartup_s = 0.5\n')
    with start_sim(str(path), time_scale=50) as sim:
        said: list[Event] = []
        session = Session(host="t")
        session.add_sink(said.append)
        plan = SweepSpec(url=sim.url, model="m", levels=SEEDS)
        asyncio.run(say_drive_limit(session, plan, "t"))
        lines = [e.message for e in said if isinstance(e, ErrorEvent)]
        expected = check_drive(SEEDS, calibrate(), time_scale=50, tokens_per_request=512).line()
        assert lines == [expected] and "at time scale 50" in lines[0]
        said.clear()
        asyncio.run(say_drive_limit(session, plan.model_copy(update={"levels": [1]}), "t"))
        assert not check_drive([1], calibrate(), time_scale=50).exceeds and said == []  # within reach: silent


async def test_the_cockpit_sweep_form_shows_the_warning_only_when_the_plan_exceeds() -> None:
    from textual.app import App
    from textual.widgets import Input, Static

    from kimitui.tui.model.cockpit_state import CockpitModel
    from kimitui.tui.screens.sweep_form import SweepForm

    model = CockpitModel(host="sim")
    model.sim_time_scale = 20.0
    form = SweepForm(SweepSpec(url="http://127.0.0.1:1", model="m", levels=SEEDS), model, drive=COST)
    app: App[None] = App()
    async with app.run_test(size=(120, 50)) as pilot:
        await app.push_screen(form)
        await pilot.pause()
        shown = form.query_one("#sweep-drive", Static)
        expected = check_drive(SEEDS, COST, time_scale=20, tokens_per_request=512).line()
        assert shown.display and str(shown.render()).replace("\n", " ").startswith("⚠ this client can drive")
        assert expected is not None and "256 at time scale 20" in expected
        form.query_one("#sweep-levels", Input).value = "1, 8"  # within reach: the warning goes
        await pilot.pause()
        assert not shown.display


def test_the_form_reads_the_cost_off_the_last_sweep_and_never_measures() -> None:
    from kimitui.tui.model.cockpit_state import CockpitModel
    from kimitui.tui.screens.sweep_form import form_cost

    calibrate()  # a calibration elsewhere in this process is not the form's to use
    assert form_cost(CockpitModel(host="sim")) is None
    assert form_cost(CockpitModel(host="sim"), COST) is COST
