"""Cost per million output tokens (issue 34): the arithmetic, and the config's `[cost]` table."""

from __future__ import annotations

import pytest

from kimitui.analysis.cost import CostRates, energy_cost_per_mtok, gpu_cost_per_mtok, level_cost
from kimitui.config import ConfigError, parse_config


def test_gpu_time_per_million_tokens() -> None:
    # 8 GPUs at 2.10 an hour = 16.80 an hour; 1000 tok/s = 3.6 M tokens an hour: 4.6667 per M tokens
    assert gpu_cost_per_mtok(2.10, 8, 1000.0) == pytest.approx(16.80 / 3.6)


def test_energy_per_million_tokens() -> None:
    # 4 J/token x 1e6 = 4 MJ = 1.111 kWh, at 0.18 a kWh: 0.2
    assert energy_cost_per_mtok(0.18, 4.0) == pytest.approx(0.2)


def test_both_parts_add_up_and_a_missing_part_leaves_no_total() -> None:
    rates = CostRates(gpu_hour=2.10, kwh=0.18, currency="USD")
    cost = level_cost(rates, tok_s=1000.0, gpus=8, j_per_token=4.0)
    assert cost is not None
    assert cost.per_mtok == pytest.approx(16.80 / 3.6 + 0.2)
    assert cost.text() == "4.87 USD/Mtok"
    partial = level_cost(rates, tok_s=1000.0, gpus=8, j_per_token=None)
    assert partial is not None and partial.per_mtok is None and partial.gpu_per_mtok == pytest.approx(16.80 / 3.6)
    assert partial.reason == "energy: no J per token (no GPU power samples cover the level)"
    assert partial.text() == "-"


def test_only_what_is_configured_counts_and_nothing_configured_is_no_cost() -> None:
    only_gpu = level_cost(CostRates(gpu_hour=1.0), tok_s=100.0, gpus=1, j_per_token=None)
    assert only_gpu is not None and only_gpu.per_mtok == pytest.approx(1e6 / 360000)
    assert level_cost(CostRates(), tok_s=100.0, gpus=1, j_per_token=1.0) is None
    assert level_cost(None, tok_s=100.0, gpus=1, j_per_token=1.0) is None
    no_gpus = level_cost(CostRates(gpu_hour=1.0), tok_s=100.0, gpus=None, j_per_token=None)
    assert no_gpus is not None and no_gpus.per_mtok is None and "number of GPUs is unknown" in no_gpus.reason


def test_the_cost_table_of_the_config() -> None:
    config = parse_config('[cost]\ngpu_hour = 2.10\nkwh = 0.18\ncurrency = "USD"\n', "c.toml")
    assert config.cost.rates() == CostRates(2.10, 0.18, "USD")
    assert parse_config("", "c.toml").cost.rates() is None


@pytest.mark.parametrize(("text", "message"), [
    ("[cost]\ngpu_hour = -1\n", "c.toml:2: cost.gpu_hour: Input should be greater than 0"),
    ('\n[cost]\nkwh = "cheap"\n', "c.toml:3: cost.kwh: Input should be a valid number"),
    ("[cost]\ngpu_hours = 2\n", "c.toml:2: cost.gpu_hours: unknown field `gpu_hours`"),
    ('[cost]\ncurrency = "US D"\n', "c.toml:2: cost.currency: 'US D' is not a currency label"),
])
def test_a_bad_cost_names_the_file_the_line_and_the_field(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "c.toml")
    assert str(err.value).startswith(message)
