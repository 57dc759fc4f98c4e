"""The confound guard: baselines per host, plain messages, single-knob variants as profile files."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kimitui.launcher import guard
from kimitui.profiles import load_profile


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_two_knobs_at_once_is_called_confounded_and_existing_single_knob_profiles_are_offered() -> None:
    base, v2 = load_profile("ep8-tuned"), load_profile("ep8-v2")
    report = guard.check(base, v2)
    assert report.confounded
    assert {k: report.changes[k] for k in ("enable_eplb", "num_continuous_decode_steps")} == {
        "enable_eplb": (False, True), "num_continuous_decode_steps": (8, 16)}
    assert report.message.startswith("confounded: 2 knobs changed from the baseline ep8-tuned")
    assert "enable_eplb" in report.message and "num_continuous_decode_steps" in report.message
    assert {(v.name, v.knob, v.existing) for v in report.variants} == {
        ("ep8-eplb", "enable_eplb", True),
        ("ep8-cont16", "num_continuous_decode_steps", True),
    }
    assert any("num_continuous_decode_steps has no effect in this SGLang" in w for w in report.warnings)
    text = "\n".join(report.lines())
    assert "enable_eplb: false -> true" in text and "num_continuous_decode_steps: 8 -> 16" in text


def test_one_knob_is_not_confounded_and_offers_nothing() -> None:
    report = guard.check(load_profile("ep8-tuned"), load_profile("ep8-eplb"))
    assert not report.confounded and report.variants == []
    assert report.message == ("ep8-eplb: one knob changed from the baseline ep8-tuned: enable_eplb: false -> true "
                              "(and only what it reports: expert_balancedness_report_mode, "
                              "env.SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL)")
    dflash = guard.check(load_profile("ep8-tuned"), load_profile("ep8-dflash"))
    assert not dflash.confounded and "one knob family changed from the baseline ep8-tuned: speculative decoding" in dflash.message
    same = guard.check(load_profile("ep8-tuned"), load_profile("ep8-tuned"))
    assert same.changes == {} and "no knob differs" in same.message


def test_variants_are_written_as_profiles_that_extend_the_baseline_and_change_one_knob(tmp_path: Path) -> None:
    base, v2 = load_profile("ep8-tuned"), load_profile("ep8-v2")
    report = guard.check(base, v2, candidates=[])  # no existing alternatives: generate them
    assert [v.existing for v in report.variants] == [False, False]
    out = tmp_path / "variants"
    paths = guard.write_variants(report, out)
    assert sorted(p.name for p in paths) == ["ep8-tuned-cont16.toml", "ep8-tuned-eplb-on.toml"]
    for path in paths:
        doc = tomllib.loads(path.read_text())
        assert doc["extends"] == "ep8-tuned" and doc["name"] == path.stem
        variant = load_profile(str(path))
        one = guard.check(base, variant)
        assert len(one.changes) == 1 and not one.confounded
    # never overwritten: an operator's edit of a variant survives
    paths[0].write_text(paths[0].read_text() + "# edited\n")
    guard.write_variants(report, out)
    assert paths[0].read_text().endswith("# edited\n")


def test_baseline_is_per_host_persisted_and_defaults_to_the_running_profile(_state: Path) -> None:
    assert guard.baseline_name("sim", running="ep8-tuned") == "ep8-tuned"  # nothing marked yet
    assert guard.baseline_name("sim") is None
    event = guard.mark_baseline("sim", load_profile("ep8-eplb"))
    assert (event.kind, event.host, event.profile) == ("baseline", "sim", "ep8-eplb")
    assert guard.baseline_name("sim", running="ep8-tuned") == "ep8-eplb"
    assert guard.baseline_name("ct200", running="tp8") == "tp8"  # other hosts are not affected
    assert (_state / "baselines.json").exists()
    baseline = guard.load_baseline("sim")
    assert baseline is not None and baseline.name == "ep8-eplb"


def test_sweep_notice_compares_the_running_profile_with_the_baseline() -> None:
    assert guard.sweep_notice("sim", load_profile("ep8-v2")) is None  # no baseline marked
    guard.mark_baseline("sim", "ep8-tuned")
    assert guard.sweep_notice("sim", load_profile("ep8-tuned")) is None  # running the baseline itself
    notice = guard.sweep_notice("sim", load_profile("ep8-v2"))
    assert notice is not None and notice.confounded and notice.baseline == "ep8-tuned"


def test_a_broken_profile_elsewhere_hides_no_single_knob_suggestion(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    extra = tmp_path / "profiles"
    extra.mkdir()
    (extra / "broken.toml").write_text('name = "broken"\nextends = "no-such-profile"\n')
    monkeypatch.setenv("KIMITUI_PROFILES", str(extra))
    report = guard.check(load_profile("ep8-tuned"), load_profile("ep8-v2"))
    assert {(v.name, v.existing) for v in report.variants} == {("ep8-eplb", True), ("ep8-cont16", True)}


def test_a_confound_with_a_drafter_offers_the_whole_family_as_one_variant(tmp_path: Path) -> None:
    """ep8-eplb -> ep8-dflash: two knob families.  The drafter is offered (and written) as one variant carrying all
    its knobs (0.5.23 arg_groups/speculative_hook.py _handle_dflash resolves them together), EPLB off as the
    existing ep8-tuned."""
    base, target = load_profile("ep8-eplb"), load_profile("ep8-dflash")
    report = guard.check(base, target)
    assert report.confounded
    assert report.message.startswith("confounded: 2 knob families changed from the baseline ep8-eplb (enable_eplb; "
                                      "speculative decoding (speculative_algorithm, speculative_draft_model_path, "
                                      "speculative_dflash_block_size))")
    by_name = {v.name: v for v in report.variants}
    assert set(by_name) == {"ep8-tuned", "ep8-eplb-dflash"} and by_name["ep8-tuned"].existing
    drafter = by_name["ep8-eplb-dflash"]
    assert not drafter.existing and drafter.settings() == {
        "speculative_algorithm": "DFLASH", "speculative_draft_model_path": "/root/models/Kimi-K2.6-DFlash",
        "speculative_dflash_block_size": 16}
    [path] = guard.write_variants(report, tmp_path / "variants")
    doc = tomllib.loads(path.read_text())
    assert doc["extends"] == "ep8-eplb" and doc["speculative_dflash_block_size"] == 16
    assert "with only speculative decoding changed" in doc["description"]
    one = guard.check(base, load_profile(str(path)))
    assert not one.confounded and "one knob family changed from the baseline ep8-eplb" in one.message


def test_a_swap_offers_only_variants_that_exist_as_buttons() -> None:
    """The swap dialog's 'Take X instead' swaps to X: a variant not yet written is no button (launcher/plan.py)."""
    from kimitui.launcher.plan import plan_swap

    plan = plan_swap(load_profile("ep8-dflash"), running=load_profile("ep8-eplb"), baseline=load_profile("ep8-eplb"))
    assert plan.confounded and plan.variants == ["ep8-tuned"]
