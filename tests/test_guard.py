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
                              "(and only where it listens or what it reports: expert_balancedness_report_mode, "
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
