"""Every lint rule: SGLang's real constraints (shared/reference/sglang.md §2, §6)."""

from __future__ import annotations

from typing import Any

import pytest

from kimitui.profiles import Profile, has_errors, lint_profile, load_profile
from tests.support.profiles import ProfileDirs, profile_env  # noqa: F401


def make(**knobs: Any) -> Profile:
    return Profile(name="t", model_path="/m", **knobs)


def issues(p: Profile) -> set[tuple[str, str]]:
    return {(i.severity, i.field) for i in lint_profile(p)}


def message(p: Profile, field: str) -> str:
    return next(i.message for i in lint_profile(p) if i.field == field)


def test_clean_profile_has_no_issues() -> None:
    assert lint_profile(make(tp_size=8, ep_size=8, enable_eplb=True, moe_dense_tp_size=1)) == []


@pytest.mark.parametrize(("tp", "ep", "bad"), [(8, 3, True), (8, 16, True), (None, 2, True), (8, 4, False), (8, 8, False), (8, None, False)])
def test_ep_size_must_divide_tp_size(tp: int | None, ep: int | None, bad: bool) -> None:
    p = make(tp_size=tp, ep_size=ep)
    assert (("error", "ep_size") in issues(p)) is bad
    if bad:
        assert "must divide tp_size" in message(p, "ep_size")


def test_enable_eplb_needs_ep_greater_than_one() -> None:
    assert ("error", "enable_eplb") in issues(make(tp_size=8, enable_eplb=True))
    assert ("error", "enable_eplb") in issues(make(tp_size=8, ep_size=1, enable_eplb=True))
    assert ("error", "enable_eplb") not in issues(make(tp_size=8, ep_size=2, enable_eplb=True))


@pytest.mark.parametrize(("value", "bad"), [(None, False), (1, False), (2, True), (8, True)])
def test_moe_dense_tp_size_accepts_only_one(value: int | None, bad: bool) -> None:
    assert (("error", "moe_dense_tp_size") in issues(make(tp_size=8, moe_dense_tp_size=value))) is bad


@pytest.mark.parametrize("knob", ["enable_ep_moe", "enable_deepep_moe"])
def test_removed_flags_as_knobs_are_errors(knob: str) -> None:
    p = make(tp_size=8, **{knob: True})
    assert ("error", knob) in issues(p)
    assert "removed from SGLang" in message(p, knob)
    assert has_errors(lint_profile(p))


@pytest.mark.parametrize(("arg", "hint"), [("--enable-ep-moe", "ep_size"), ("--enable-deepep-moe", "moe_a2a_backend"), ("--enable-ep-moe=true", "ep_size")])
def test_removed_flags_in_extra_args_are_errors(arg: str, hint: str) -> None:
    p = make(tp_size=8, extra_args=["--log-level", "debug", arg])
    assert ("error", "extra_args[2]") in issues(p)
    assert hint in message(p, "extra_args[2]")


def test_num_continuous_decode_steps_is_a_warning_quoting_the_fact() -> None:
    p = make(num_continuous_decode_steps=16)
    found = [i for i in lint_profile(p) if i.field == "num_continuous_decode_steps"]
    assert [i.severity for i in found] == ["warning"]
    assert "has had no effect in SGLang since late 2024" in found[0].message
    assert "PR #2095 (2024-11-19)" in found[0].message
    assert not has_errors(lint_profile(p))
    assert lint_profile(make(num_continuous_decode_steps=1)) == []


def test_dp_attention_rules() -> None:
    assert ("error", "dp_size") in issues(make(tp_size=8, dp_size=3, enable_dp_attention=True))
    assert ("error", "dp_size") not in issues(make(tp_size=8, dp_size=4, enable_dp_attention=True))
    assert ("warning", "enable_dp_attention") in issues(make(tp_size=8, enable_dp_attention=True))


def test_a2a_backend_forces_ep_equal_tp() -> None:
    assert ("warning", "ep_size") in issues(make(tp_size=8, ep_size=4, moe_a2a_backend="deepep"))
    assert ("warning", "ep_size") not in issues(make(tp_size=8, ep_size=8, moe_a2a_backend="deepep"))
    assert ("warning", "ep_size") not in issues(make(tp_size=8, ep_size=4, moe_a2a_backend="none"))


def test_eplb_knobs_without_eplb_warn() -> None:
    p = make(tp_size=8, ep_size=8, eplb_rebalance_num_iterations=500)
    assert ("warning", "eplb_rebalance_num_iterations") in issues(p)
    assert ("warning", "eplb_rebalance_num_iterations") not in issues(p.model_copy(update={"enable_eplb": True}))


def test_recorder_buffer_larger_than_rebalance_window_is_an_error() -> None:
    p = make(tp_size=8, ep_size=8, enable_eplb=True, expert_distribution_recorder_buffer_size=2000)
    assert ("error", "expert_distribution_recorder_buffer_size") in issues(p)  # default window 1000
    ok = make(tp_size=8, ep_size=8, enable_eplb=True, eplb_rebalance_num_iterations=4000, expert_distribution_recorder_buffer_size=2000)
    assert ("error", "expert_distribution_recorder_buffer_size") not in issues(ok)


def test_batches_above_cuda_graph_max_bs_warn() -> None:
    def warns(p: Profile) -> bool:  # this rule's warning (0.5.23 also does not know the flag: another warning)
        return any("run without CUDA graphs" in i.message for i in lint_profile(p) if i.field == "cuda_graph_max_bs")

    assert warns(make(cuda_graph_max_bs=32, max_running_requests=4096))
    assert not warns(make(cuda_graph_max_bs=256, max_running_requests=256))
    # with DP attention a user max_running_requests is per-DP-worker after division by dp_size
    dp = make(tp_size=8, dp_size=8, enable_dp_attention=True, cuda_graph_max_bs=64, max_running_requests=512)
    assert not warns(dp)
    assert not warns(make(cuda_graph_max_bs=32, max_running_requests=4096, disable_cuda_graph=True))


def test_speculative_knobs_without_algorithm_warn() -> None:
    assert ("warning", "speculative_num_steps") in issues(make(speculative_num_steps=3))
    assert ("warning", "speculative_num_steps") not in issues(make(speculative_algorithm="EAGLE", speculative_num_steps=3))


def test_extra_args_duplicating_a_knob_warn() -> None:
    p = make(tp_size=8, extra_args=["--tp", "4", "--ep-size=2", "--disable-radix-cache"])
    assert {("warning", "extra_args[0]"), ("warning", "extra_args[2]")} <= issues(p)
    assert ("warning", "extra_args[3]") not in issues(p)
    assert "tp_size" in message(p, "extra_args[0]")


def test_errors_come_first() -> None:
    found = lint_profile(make(tp_size=8, ep_size=3, num_continuous_decode_steps=8))
    assert [i.severity for i in found] == ["error", "warning"]


def test_shipped_profiles_have_no_lint_errors(profile_env: ProfileDirs) -> None:
    for name in ("tp8", "ep8", "ep8-tuned", "ep8-v2", "ep4", "ep8-cont4", "ep8-dense-tp1", "ep8-eplb", "ep8-cont16"):
        assert not has_errors(lint_profile(load_profile(name))), name
