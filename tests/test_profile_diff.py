"""Diff: which launch knobs differ, and the confound warning."""

from __future__ import annotations

from kimitui.profiles import Profile, diff_profiles, list_profiles, load_profile, single_knob_alternatives
from tests.support.profiles import ProfileDirs, profile_env  # noqa: F401


def test_seed_double_change_is_confounded(profile_env: ProfileDirs) -> None:
    d = diff_profiles(load_profile("ep8-tuned"), load_profile("ep8-v2"))
    assert d.families == {"enable_eplb": ["enable_eplb"], "num_continuous_decode_steps": ["num_continuous_decode_steps"]}
    assert d.observability == ["expert_balancedness_report_mode", "env.SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL"]
    assert d.confounded
    assert d.lines()[0] == "enable_eplb: false -> true" and "num_continuous_decode_steps: 8 -> 16" in d.lines()
    assert d.warning() == "confounded: 2 knobs changed (enable_eplb, num_continuous_decode_steps)"
    assert d.as_event_diff()["num_continuous_decode_steps"] == [8, 16]


def test_single_knob_change_is_not_confounded(profile_env: ProfileDirs) -> None:
    d = diff_profiles(load_profile("ep8-tuned"), load_profile("ep8-eplb"))
    assert d.lines()[0] == "enable_eplb: false -> true"
    assert d.families == {"enable_eplb": ["enable_eplb"]}  # the heatmap and balancedness reports only report
    assert not d.confounded and d.warning() is None


def test_a_drafter_is_one_knob_family_not_a_confound(profile_env: ProfileDirs) -> None:
    """DFLASH's algorithm, draft model and block size are one experiment (0.5.23 arg_groups/speculative_hook.py
    _handle_dflash resolves them together); the guard names the family."""
    d = diff_profiles(load_profile("ep8-tuned"), load_profile("ep8-dflash"))
    assert set(d.changes) == {"speculative_algorithm", "speculative_draft_model_path", "speculative_dflash_block_size"}
    assert not d.confounded and d.warning() is None
    assert d.summary() == ("one knob family changed: speculative decoding (speculative_algorithm, "
                           "speculative_draft_model_path, speculative_dflash_block_size)")
    both = diff_profiles(load_profile("ep8-eplb"), load_profile("ep8-dflash"))
    assert both.confounded and both.warning() is not None and "knob families" in both.warning()


def test_only_observability_changed_is_no_change_a_sweep_can_feel() -> None:
    a = Profile(name="a", model_path="/m", tp_size=8)
    b = a.model_copy(update={"name": "b", "enable_mfu_metrics": True, "tokenizer_metrics_allowed_custom_labels": ["x"]})
    d = diff_profiles(a, b)
    assert d.families == {} and not d.confounded and len(d.changes) == 2


def test_identical_profiles_and_non_launch_fields(profile_env: ProfileDirs) -> None:
    a = load_profile("ep8-tuned")
    b = a.model_copy(update={"name": "other", "description": "x", "sim": a.sim.model_copy(update={"seed": 9})})
    d = diff_profiles(a, b)
    assert d.changes == {} and not d.confounded and d.lines() == []


def test_defaults_env_and_lists_are_shown(profile_env: ProfileDirs) -> None:
    a = Profile(name="a", model_path="/m", tp_size=8, env={"A": "1"})
    b = Profile(name="b", model_path="/m", tp_size=8, cuda_graph_max_bs=64, env={"A": "1", "NCCL_P2P_DISABLE": "1"}, extra_args=["--x"])
    d = diff_profiles(a, b)
    assert d.lines() == ["cuda_graph_max_bs: (default) -> 64", "extra_args: [] -> ['--x']", "env.NCCL_P2P_DISABLE: (default) -> 1"]
    assert d.warning() == "confounded: 3 knobs changed (cuda_graph_max_bs, env.NCCL_P2P_DISABLE, extra_args)"


def test_single_knob_alternatives_for_the_seed_case(profile_env: ProfileDirs) -> None:
    a, b = load_profile("ep8-tuned"), load_profile("ep8-v2")
    names = [p.name for p in single_knob_alternatives(a, b, list_profiles())]
    assert names == ["ep8-cont16", "ep8-eplb"]


def test_where_the_server_listens_is_no_knob_a_sweep_feels(profile_env: ProfileDirs) -> None:
    """``kimitui --sim-port`` moves every profile to another port: a drafter on it is still one change."""
    base = load_profile("ep8-tuned")
    moved = load_profile("ep8-dflash").model_copy(update={"port": 30071})
    d = diff_profiles(base, moved)
    assert "port" in d.changes and list(d.families) == ["speculative decoding"] and not d.confounded


def test_an_alternative_makes_a_whole_family_change_never_half_of_one(profile_env: ProfileDirs) -> None:
    """ep8-eplb -> ep8-dflash changes EPLB and the drafter.  A profile that sets DFLASH with another draft model
    (or without the block size) is another experiment, not the drafter half of this one (the algorithm, draft
    model and block size resolve together: 0.5.23 arg_groups/speculative_hook.py _handle_dflash)."""
    a, b = load_profile("ep8-eplb"), load_profile("ep8-dflash")
    d = diff_profiles(a, b)
    assert d.confounded and list(d.families) == ["enable_eplb", "speculative decoding"]
    assert d.warning() == ("confounded: 2 knob families changed (enable_eplb; speculative decoding "
                           "(speculative_algorithm, speculative_draft_model_path, speculative_dflash_block_size))")
    whole = a.model_copy(update={"name": "eplb-dflash", "speculative_algorithm": "DFLASH",
                                 "speculative_draft_model_path": "/root/models/Kimi-K2.6-DFlash",
                                 "speculative_dflash_block_size": 16})
    half = whole.model_copy(update={"name": "eplb-dflash-no-block", "speculative_dflash_block_size": None})
    other = whole.model_copy(update={"name": "eplb-other-draft", "speculative_draft_model_path": "/other"})
    names = [p.name for p in single_knob_alternatives(a, b, [whole, half, other, load_profile("ep8-tuned")])]
    assert names == ["eplb-dflash", "ep8-tuned"]  # ep8-tuned: EPLB off, the other family of the change
