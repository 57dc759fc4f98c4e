"""Energy and cost as the autopilot's objective (issue 34): ``kimitui tune --objective tokens_per_kj|cost_per_mtok``.

The sweeps are tests/test_energy_report.py's, built by hand: every level draws a known power for a known time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kimitui.analysis.cost import CostRates
from kimitui.cli import main
from kimitui.report import summarize
from kimitui.report.sweep_summary import SweepRun
from kimitui.tune.state import TunePlan
from kimitui.tune.steps import judge_step, merge_runs, remeasure_spec
from tests.test_energy_report import LEVELS, rec, sweep


def run_of(profile: str, scale_w: float = 1.0, *, gpus: bool = True, sweep_id: str = "s1") -> SweepRun:
    levels = {c: (d, w * scale_w, tpot) for c, (d, w, tpot) in LEVELS.items()}
    return summarize(rec(sweep(profile, levels, gpus=gpus, sweep_id=sweep_id, jitter=0.2))).sweeps[0]


def test_more_power_for_the_same_tokens_is_worse_on_tokens_per_kj_and_less_is_better() -> None:
    best = run_of("ep8-tuned")
    worse = judge_step(best, run_of("ep8-eplb", 1.25), "tokens_per_kj")
    # the best level of each side is C=64 (1600 tok/s at 4 kW: 400 tokens per kJ; at 5 kW: 320)
    assert worse.decision == "worse"
    assert worse.objective_change.startswith("tokens per kJ 400 -> 320 (-20 %")
    assert "A at C=64, B at C=64" in worse.objective_change
    better = judge_step(best, run_of("ep8-eplb", 0.8), "tokens_per_kj")
    assert better.decision == "better"


def test_the_same_energy_within_noise_is_not_better() -> None:
    j = judge_step(run_of("ep8-tuned"), run_of("ep8-v2", 1.01), "tokens_per_kj")
    assert j.decision in ("same", "unsure")


def test_without_gpu_power_the_energy_objective_cannot_judge_and_says_why() -> None:
    j = judge_step(run_of("ep8-tuned"), run_of("ep8-eplb", gpus=False), "tokens_per_kj")
    assert j.decision == "not_comparable"
    assert j.objective_change == "tokens_per_kj: no judged figure (no level has GPU power samples on both sides)"


def test_cost_as_the_objective_prices_both_sides_alike() -> None:
    rates = CostRates(kwh=0.18, currency="USD")
    j = judge_step(run_of("ep8-tuned"), run_of("ep8-eplb", 1.25), "cost_per_mtok", rates=rates)
    # C=64: 2.5 J/token -> 0.125 per M tokens; 3.125 J/token -> 0.156
    assert j.decision == "worse" and j.objective_change.startswith("cost per M tokens 0.125 -> 0.156 (+25 %")
    none = judge_step(run_of("ep8-tuned"), run_of("ep8-eplb", 1.25), "cost_per_mtok")
    assert none.decision == "not_comparable" and "[cost] prices" in none.objective_change


def test_repeats_keep_their_energy_when_merged() -> None:
    merged = merge_runs([run_of("ep8-eplb", sweep_id="a"), run_of("ep8-eplb", sweep_id="b")])
    row = merged.levels[64]
    assert len(row.repeats) == 2 and len(row.energy) == 2 and row.j_per_token == pytest.approx(2.5)


def test_an_unsure_energy_step_is_measured_again_where_the_noise_is() -> None:
    j = judge_step(run_of("ep8-tuned"), run_of("ep8-v2", 1.06), "tokens_per_kj")
    spec = remeasure_spec(run_of("ep8-tuned").spec, j, "tokens_per_kj")
    assert set(spec.levels) <= {1, 8, 64} and spec.levels


def test_the_plan_keeps_the_prices_and_names_the_objective() -> None:
    from kimitui.tune.plan import plan_lines

    spec = run_of("ep8-tuned").spec
    plan = TunePlan(start="ep8-tuned", candidates=[], workload=spec, objective="cost_per_mtok",
                    cost={"gpu_hour": 2.1, "currency": "USD"})
    assert plan.cost_rates() == CostRates(2.1, None, "USD")
    assert "objective the lowest cost per million tokens (any level)" in plan_lines(plan, "sim", simulated=True)[0]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var))
    monkeypatch.delenv("KIMITUI_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_kimitui_tune_accepts_the_energy_and_cost_objectives(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["tune", "--time-scale", "1", "--levels", "1,16", "--change", "enable_eplb=true", "--dry-run"]
    assert main([*args, "--objective", "tokens_per_kj"]) == 0
    assert "objective the most tokens per kJ of GPU energy (any level)" in capsys.readouterr().out
    assert main([*args, "--objective", "cost_per_mtok"]) == 2
    assert "--objective cost_per_mtok needs prices: add [cost] gpu_hour" in capsys.readouterr().err
    config = home / "c.toml"
    config.write_text("[cost]\nkwh = 0.18\n")
    assert main(["--config", str(config), *args, "--objective", "cost_per_mtok"]) == 0
