"""The autopilot's parts: what it tries (and skips), the variant files, the step verdict, the state file, the plan.

The loop itself runs against the real simulated host in tests/test_tune_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kimitui.profiles import load_profile, scan_profiles
from kimitui.report.sweep_summary import sweeps_of
from kimitui.tune import candidates as cands
from kimitui.tune import state as store
from kimitui.tune.plan import estimate, grid_sweeps, plan_lines
from kimitui.tune.state import Candidate, TunePlan
from kimitui.tune.steps import judge_step, merge_runs
from kimitui.tune.tuner import new_state
from kimitui.tune.variants import materialize, step_settings, variant_name
from kimitui.events import SweepSpec
from tests.support.recordings import synthetic_sweep


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        (tmp_path / var).mkdir()
        monkeypatch.setenv(var, str(tmp_path / var))
    monkeypatch.delenv("KIMITUI_PROFILES", raising=False)
    monkeypatch.delenv("KIMITUI_STATE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_defaults_are_the_seeds_next_experiments_and_the_no_effect_knobs_are_skipped_with_why(home: Path) -> None:
    start = load_profile("ep8-tuned")
    good, _ = scan_profiles()
    found, skipped = cands.default_candidates(start, good)
    assert [c.family for c in found][:4] == ["enable_eplb", "ep_size", "moe_dense_tp_size", "speculative decoding"]
    assert found[3].settings["speculative_algorithm"] == "DFLASH" and found[3].source == "profile ep8-dflash"
    assert found[0].settings["enable_eplb"] is True and found[0].source == "profile ep8-eplb"
    text = "\n".join(skipped)
    assert "ep8-v2: changes 2 knob families at once" in text  # the notes' confound is never one step
    assert "num_continuous_decode_steps 4 (profile ep8-cont4): num_continuous_decode_steps has had no effect" in text
    assert not any("num_continuous_decode_steps" in c.settings for c in found)


def test_seed_experiments_fill_in_where_no_profile_makes_them_and_a_draft_model_adds_dflash(home: Path) -> None:
    start = load_profile("ep8-tuned")
    found, skipped = cands.default_candidates(start, [start])
    assert [c.label for c in found] == ["enable_eplb true", "ep_size 4", "moe_dense_tp_size 1"]
    assert all(c.source == "the field notes' next experiment" for c in found)
    assert any("DFLASH drafter: no draft model known" in s for s in skipped)
    found, _ = cands.default_candidates(start, [start], draft_model="/models/draft")
    assert found[-1].settings == {"speculative_algorithm": "DFLASH", "speculative_draft_model_path": "/models/draft",
                                  "speculative_dflash_block_size": 16}


def test_a_start_that_already_runs_the_drafter_gets_no_drafter_step_and_no_word_about_one(home: Path) -> None:
    """From ep8-dflash the plan said "DFLASH drafter: no draft model known" (it runs one), and with
    --draft-model it planned a step adding the drafter the start already has."""
    start = load_profile("ep8-dflash")
    for draft in (None, "/models/draft"):
        found, skipped = cands.default_candidates(start, [start], draft_model=draft)
        assert not any(c.settings.get("speculative_algorithm") == "DFLASH" for c in found), found
        assert not any("DFLASH drafter" in s for s in skipped), skipped


@pytest.mark.parametrize("text, knob, value", [("enable_eplb=true", "enable_eplb", True), ("ep-size=4", "ep_size", 4),
                                               ("mem_fraction_static=0.85", "mem_fraction_static", 0.85)])
def test_a_change_from_the_command_line(text: str, knob: str, value: object) -> None:
    c = cands.parse_change(text)
    assert c.settings == {knob: value} and c.source == "--change"


def test_a_bad_change_says_how_to_write_one(home: Path) -> None:
    with pytest.raises(ValueError, match="write knob=value"):
        cands.parse_change("enable_eplb")
    kept, skipped = cands.drop_no_effect(load_profile("ep8-tuned"), [cands.parse_change("no_such_knob=1")])
    assert not kept and "no_such_knob is not a profile knob" in skipped[0]


def test_each_step_is_the_best_with_one_family_replaced_in_a_file_extending_the_start(home: Path) -> None:
    start = load_profile("ep8-tuned")
    dflash = Candidate(label="DFLASH drafter", family="speculative decoding",
                       settings={"speculative_algorithm": "DFLASH", "speculative_draft_model_path": "/m/d",
                                 "speculative_dflash_block_size": 16})
    eagle = Candidate(label="EAGLE3 drafter", family="speculative decoding",
                      settings={"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "/m/e"})
    dense = cands.parse_change("moe_dense_tp_size=1")
    best = step_settings({}, dense)
    settings = step_settings(best, dflash)
    name = materialize(start, settings, dflash.label, [])
    assert name == "ep8-tuned-dense-tp1-dflash" == variant_name("ep8-tuned", settings)
    p = load_profile(name)
    assert p.extends == "ep8-tuned" and p.moe_dense_tp_size == 1 and p.speculative_algorithm == "DFLASH"
    assert "written by kimitui tune" in p.description
    again = materialize(start, settings, dflash.label, [])
    assert again == name  # the same settings reuse the file
    swapped = step_settings(settings, eagle)  # the drafter family replaced whole: no DFLASH block size left over
    assert "speculative_dflash_block_size" not in swapped and swapped["speculative_algorithm"] == "EAGLE3"
    # an existing profile that makes exactly the change is used as it is
    eplb, _ = cands.from_profile(start, load_profile("ep8-eplb"))
    assert eplb is not None
    assert materialize(start, step_settings({}, eplb), eplb.label, [], existing="ep8-eplb") == "ep8-eplb"


def test_a_name_taken_by_another_profile_gets_a_suffix_never_an_overwrite(home: Path) -> None:
    start = load_profile("ep8-tuned")
    from kimitui.profiles.loader import user_dir

    user_dir().mkdir(parents=True)
    taken = user_dir() / "ep8-tuned-dense-tp1.toml"
    taken.write_text('name = "ep8-tuned-dense-tp1"\nextends = "ep8-tuned"\nmoe_dense_tp_size = 2\n')
    name = materialize(start, {"moe_dense_tp_size": 1}, "dense 1", [])
    assert name == "ep8-tuned-dense-tp1-2" and "moe_dense_tp_size = 2" in taken.read_text()


def _run(**kw: object):
    return sweeps_of(synthetic_sweep(levels=[1, 16, 64], requests_per_level=24, **kw))[0]  # type: ignore[arg-type]


def test_a_clear_regression_is_worse_and_a_clear_gain_better() -> None:
    best = _run(seed=1)
    worse = judge_step(best, _run(seed=2, peak_scale=0.6, sweep_id="s2"), "peak")
    assert worse.decision == "worse" and "-4" in worse.objective_change and "regressed at C=" in worse.where
    better = judge_step(best, _run(seed=3, peak_scale=1.3, sweep_id="s3"), "peak")
    assert better.decision == "better" and better.objective_change.startswith("peak ")
    same = judge_step(best, _run(seed=4, sweep_id="s4"), "peak")
    assert same.decision in ("same", "unsure")
    level = judge_step(best, _run(seed=5, peak_scale=1.3, sweep_id="s5"), "level:1")
    assert level.decision == "better" and level.objective_change.startswith("C=1 aggregate")


def test_a_regression_names_its_root_cause_a_slower_pace_when_no_stall_explains_it() -> None:
    best = _run(seed=1, knobs={"enable_eplb": False})
    cand = _run(seed=2, peak_scale=0.6, sweep_id="s2", knobs={"enable_eplb": True})
    j = judge_step(best, cand, "peak")
    assert "every request decoded slower" in j.cause and "the change's own cost per step" in j.cause
    assert "one knob changed: enable_eplb" in j.cause


def test_repeats_merge_into_one_run_with_their_requests_pooled() -> None:
    a, b = _run(seed=1), _run(seed=2, sweep_id="s2")
    merged = merge_runs([a, b])
    row = merged.levels[16]
    assert [r.repeat for r in row.repeats] == [0, 1] and len(row.requests) == 48 and merged.spec.repeats == 2
    assert merge_runs([a]) is a


def _plan(**kw: object) -> TunePlan:
    spec = SweepSpec(url="", model="", levels=[1, 16, 64, 256])
    c = [cands.parse_change("enable_eplb=true"), cands.parse_change("ep_size=4"), cands.parse_change("ep_size=2")]
    return TunePlan(start="ep8-tuned", candidates=c, workload=spec, skipped=["x: why"], **kw)  # type: ignore[arg-type]


def test_the_dry_run_plan_lists_changes_skips_and_an_estimate_with_the_grid_it_saves() -> None:
    plan = _plan(sim_time_scale=40.0)
    lines = plan_lines(plan, "sim", simulated=True)
    assert "1. enable_eplb true  (--change)" in lines[2] and "skipped: x: why" in lines[5]
    assert "at time-scale 40" in lines[-1] and "a full grid over the same changes: 6 profiles" in lines[-1]
    assert grid_sweeps(plan) == 2 * 3
    s40, sweeps, swaps = estimate(plan, True)
    s1, _, _ = estimate(_plan(), True)
    assert (sweeps, swaps) == (5, 7) and s1 > 20 * s40  # the simulated clock runs 40x
    assert estimate(_plan(time_budget_s=60.0), False)[0] == 60.0


def test_the_state_survives_a_round_trip_and_a_broken_file_names_itself(home: Path) -> None:
    tune_id, where = store.new_tune_dir("sim")
    st = new_state(tune_id, "sim", _plan())
    st.steps[0].status = "kept"
    store.save(st, where)
    back = store.load(where)
    assert back == st and back.current is not None and back.current.index == 2
    assert store.resumable("sim") == where
    st.status = "finished"
    store.save(st, where)
    assert store.resumable("sim") is None and store.resumable("sim", tune_id) == where
    data = json.loads((where / "state.json").read_text())
    data["steps"][0]["status"] = "exploded"
    (where / "state.json").write_text(json.dumps(data))
    with pytest.raises(store.TuneStateError, match=r"state.json: steps.0.status"):
        store.load(where)


def test_capacity_as_the_objective_moves_by_whole_levels() -> None:
    best = _run(seed=1)
    decode = sorted(r.decode_tok_s for r in best.levels[16].requests if r.decode_tok_s)
    slo = f"decode_p50>={decode[len(decode) // 2] * 0.95:.1f}"  # best holds at C=16, not at C=64
    better = judge_step(best, _run(seed=2, peak_scale=2.0, sweep_id="s2"), "capacity", slo=slo)
    assert better.decision == "better" and better.objective_change.startswith("capacity C=16 -> C=64")
    worse = judge_step(best, _run(seed=3, peak_scale=0.8, sweep_id="s3"), "capacity", slo=slo)
    assert worse.decision == "worse" and "capacity C=16 -> C=1 " in worse.objective_change
