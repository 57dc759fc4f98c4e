"""Diff: which launch knobs differ, and the confound warning."""

from __future__ import annotations

from kimitui.profiles import Profile, diff_profiles, list_profiles, load_profile, single_knob_alternatives
from tests.support.profiles import ProfileDirs, profile_env  # noqa: F401


def test_seed_double_change_is_confounded(profile_env: ProfileDirs) -> None:
    d = diff_profiles(load_profile("ep8-tuned"), load_profile("ep8-v2"))
    assert d.changes == {"enable_eplb": (False, True), "num_continuous_decode_steps": (8, 16)}
    assert d.confounded
    assert d.lines() == ["enable_eplb: false -> true", "num_continuous_decode_steps: 8 -> 16"]
    assert d.warning() == "confounded: 2 knobs changed (enable_eplb, num_continuous_decode_steps)"
    assert d.as_event_diff() == {"enable_eplb": [False, True], "num_continuous_decode_steps": [8, 16]}


def test_single_knob_change_is_not_confounded(profile_env: ProfileDirs) -> None:
    d = diff_profiles(load_profile("ep8-tuned"), load_profile("ep8-eplb"))
    assert d.lines() == ["enable_eplb: false -> true"]
    assert not d.confounded and d.warning() is None


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
