"""The cockpit's energy figures (issue 34): the levels table's J/tok, tok/s per kW and cost per M tokens,
and the idle power, from GPU samples built by hand (the arithmetic as tests/test_energy.py works it out)."""

from __future__ import annotations

import pytest

from kimitui.analysis.cost import CostRates
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.widgets.level_table import ENERGY_COLUMNS, LevelExtras
from tests.test_energy import _sweep_events


def folded(rates: CostRates | None = None, *, gpus_on: bool = True) -> CockpitModel:
    model = CockpitModel()
    model.sweep_state.energy.rates = rates
    model.apply(_sweep_events(gpus_on=gpus_on))
    return model


def test_a_levels_energy_reaches_the_cockpit_and_its_table() -> None:
    model = folded()
    sw = model.sweep
    assert sw is not None
    e = sw.energy[(2, 0)]
    assert e.mean_w == pytest.approx(600.0) and e.j_per_token == pytest.approx(600.0 * 8 / 2000)  # 2.4 J/token
    assert sw.idle is not None and sw.idle.mean_w == pytest.approx(200.0)
    extras = LevelExtras(model)
    assert extras.energy and not extras.cost
    # 2000 tokens / 8 s = 250 tok/s at 0.6 kW: 417 tok/s per kW
    assert extras.energy_cells["2:0"]["J/tok"] == "2.40" and extras.energy_cells["2:0"]["tok/s/kW"] == "417"
    assert extras.idle == "idle 200 W"


def test_a_configured_price_gives_the_cost_column() -> None:
    # 2 GPUs at 2.10 per hour making 250 tok/s: 4.20 / (250 * 3600 / 1e6) = 4.67 per M tokens
    extras = LevelExtras(folded(CostRates(gpu_hour=2.10, currency="USD")))
    assert extras.cost and extras.energy_cells["2:0"]["cost/M"] == "4.67"


def test_no_gpu_samples_no_energy_columns() -> None:
    extras = LevelExtras(folded(gpus_on=False))
    assert not extras.energy and extras.idle == ""
    assert set(ENERGY_COLUMNS) == {"J/tok", "tok/s/kW", "cost/M"}


def test_the_live_cockpit_prices_levels_from_the_configs_cost(sim_home) -> None:  # type: ignore[no-untyped-def]
    """``[cost]`` in the config reaches every host's model, so the levels table has its cost column (issue 34)."""
    from kimitui.live import LiveController
    from kimitui.tui.app import KimituiApp

    cfg = sim_home / "config.toml"
    cfg.write_text("[cost]\ngpu_hour = 2.10\ncurrency = \"EUR\"\n")
    app = KimituiApp(LiveController(config_path=str(cfg), record=False), tick=None)
    rates = app.fleet.model.sweep_state.energy.rates
    assert rates is not None and rates.gpu_hour == 2.10 and rates.currency == "EUR"
    plain = KimituiApp(LiveController(record=False), tick=None)
    assert plain.fleet.model.sweep_state.energy.rates is None  # nothing configured: no cost column


def test_a_sweep_the_compare_book_forgets_leaves_no_energy_behind() -> None:
    """Energy figures are kept per sweep; when the compare book drops a sweep, so does the folder (issue 30)."""
    model = folded()
    sweep_id = model.sweep.sweep_id  # type: ignore[union-attr]
    energy = model.sweep_state.energy
    assert energy.level(sweep_id, 2) is not None and energy.idle(sweep_id) is not None
    model.sweep_state.forget([sweep_id])
    assert energy.level(sweep_id, 2) is None and energy.idle(sweep_id) is None
    assert not [k for k in energy.folder.levels if k[0] == sweep_id]


def test_a_narrow_levels_panel_says_the_energy_columns_gave_way_before_it_gives_the_idle_power() -> None:
    """At 160 columns the levels panel is 80 wide: J/tok gives way, and its subtitle must say so before it spends
    its room on the idle power (the newcomer run showed the idle power and no word of the hidden column)."""
    from kimitui.tui.widgets.level_table import LevelTable

    table = LevelTable(folded())
    _, sub = table.caption()  # not mounted: the narrowest panel, 20 cells
    assert sub == "J/tok hidden: widen"


async def test_a_replay_prices_its_levels_from_the_config_as_report_does(  # type: ignore[no-untyped-def]
    tmp_path, capsys
) -> None:
    """``kimitui replay`` shows the cost column from ``[cost]`` (before, a replay read no config: no cost at all);
    a broken config is named and the replay opens without prices."""
    import argparse

    from kimitui.commands.replay import _prices_config
    from kimitui.recording import write_recording
    from kimitui.replay import ReplayController
    from kimitui.tui.app import KimituiApp
    from tests.support.tuiscreen import tick

    cfg = tmp_path / "config.toml"
    cfg.write_text("[cost]\ngpu_hour = 2.10\ncurrency = \"USD\"\n")
    path = write_recording(tmp_path / "energy.jsonl", _sweep_events(gpus_on=True))
    config = _prices_config(argparse.Namespace(config=str(cfg)))
    app = KimituiApp(ReplayController(path, speed=None), tick=None, config=config)
    async with app.run_test(size=(200, 50)) as pilot:
        for _ in range(40):
            await tick(pilot)
            app.pump(force_charts=True)
            sweep = app.model.sweep
            if sweep is not None and (2, 0) in sweep.energy:
                break
        extras = LevelExtras(app.model)
        assert extras.cost and extras.energy_cells["2:0"]["cost/M"] == "4.67"  # as the live cockpit's, above

    cfg.write_text("[cost]\ngpu_hour = -1\n")
    assert _prices_config(argparse.Namespace(config=str(cfg))) is None
    err = capsys.readouterr().err
    assert f"{cfg}:2: cost.gpu_hour" in err and "without prices" in err
