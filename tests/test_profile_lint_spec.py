"""Lint rules for speculative decoding and the reporting knobs, each following SGLang 0.5.23's own check."""

from __future__ import annotations

import pytest

from kimitui.cli import main
from kimitui.profiles import Profile, lint_profile, load_profile
from tests.support.profiles import ProfileDirs, profile_env, write_profile  # noqa: F401


def _issues(**knobs: object) -> dict[str, str]:
    p = Profile(name="p", model_path="/m", tp_size=8, ep_size=8, **knobs)  # type: ignore[arg-type]
    return {i.field: f"{i.severity}: {i.message}" for i in lint_profile(p)}


def test_the_seed_drafter_profiles_lint_clean(profile_env: ProfileDirs) -> None:
    for name in ("ep8-dflash", "ep8-eagle3"):
        fields = {i.field for i in lint_profile(load_profile(name))}
        assert fields == {"num_continuous_decode_steps"}, name  # inherited from ep8-tuned, nothing of its own


def test_draft_knobs_without_an_algorithm_do_nothing() -> None:
    """0.5.23 arg_groups/speculative_hook.py handle_speculative_decoding: nothing runs without an algorithm."""
    got = _issues(speculative_dflash_block_size=16, speculative_num_steps=3)
    assert got["speculative_dflash_block_size"].startswith("warning: has no effect without speculative_algorithm")
    assert got["speculative_num_steps"].startswith("warning: has no effect")


def test_dflash_block_size_and_draft_tokens_must_match() -> None:
    """0.5.23 arg_groups/speculative_hook.py _handle_dflash: 'Both ... are set but they differ' raises."""
    got = _issues(speculative_algorithm="DFLASH", speculative_draft_model_path="/d",
                  speculative_dflash_block_size=16, speculative_num_draft_tokens=8)
    assert got["speculative_dflash_block_size"].startswith("error: 16 differs from speculative_num_draft_tokens 8")
    assert "speculative_dflash_block_size" not in _issues(speculative_algorithm="DFLASH", speculative_draft_model_path="/d",
                                                          speculative_dflash_block_size=16, speculative_num_draft_tokens=16)


def test_dflash_refuses_pipeline_parallel_and_dp_attention_without_the_dp_lm_head() -> None:
    """0.5.23 arg_groups/speculative_hook.py _handle_dflash: pp_size != 1 raises; DP attention needs
    --enable-dp-lm-head (the DFLASH docs at its landing, PR #22077, said no DP attention at all)."""
    got = _issues(speculative_algorithm="DFLASH", speculative_draft_model_path="/d", pp_size=2)
    assert got["pp_size"].startswith("error: DFLASH speculative decoding only supports pp_size == 1")
    got = _issues(speculative_algorithm="DFLASH", speculative_draft_model_path="/d", enable_dp_attention=True, dp_size=8)
    assert got["enable_dp_attention"].startswith("error: DFLASH with DP attention requires --enable-dp-lm-head")
    ok = _issues(speculative_algorithm="DFLASH", speculative_draft_model_path="/d", enable_dp_attention=True, dp_size=8,
                 extra_args=["--enable-dp-lm-head"])
    assert "enable_dp_attention" not in ok


def test_dflash_needs_a_draft_model_and_forces_one_step_topk_one() -> None:
    """0.5.23 _handle_dflash: no draft model path raises; num_steps / eagle_topk other than 1 are overridden."""
    got = _issues(speculative_algorithm="DFLASH", speculative_num_steps=3, speculative_eagle_topk=4)
    assert got["speculative_draft_model_path"].startswith("error: DFLASH needs a draft model")
    assert got["speculative_num_steps"] == "warning: DFLASH only supports 1; SGLang overrides 3 to 1"
    assert got["speculative_eagle_topk"] == "warning: DFLASH only supports 1; SGLang overrides 4 to 1"


def test_unknown_algorithm_and_block_size_on_another_algorithm() -> None:
    """0.5.23 arg_groups/fields/spec.py: the built-ins are EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK, UNO."""
    got = _issues(speculative_algorithm="MEDUSA", speculative_draft_model_path="/d")
    assert "not one of SGLang 0.5.23's built-in algorithms" in got["speculative_algorithm"]
    got = _issues(speculative_algorithm="EAGLE3", speculative_draft_model_path="/d", speculative_dflash_block_size=8)
    assert got["speculative_dflash_block_size"].startswith("warning: is DFLASH only")


def test_reporting_knobs_that_would_report_nothing() -> None:
    """0.5.23 eplb/expert_distribution.py: the heatmap is filled only while the balancedness report is on
    (_append_utilization_rate); arg_groups/validation_hook.py: custom labels need a header."""
    got = _issues(env={"SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL": "10"})
    assert "expert_balancedness_report_mode is on" in got["env.SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL"]
    got = _issues(tokenizer_metrics_allowed_custom_labels=["a"], tokenizer_metrics_custom_labels_header="")
    assert got["tokenizer_metrics_custom_labels_header"].startswith("error: custom labels need a header")
    got = _issues(expert_balancedness_report_mode="both")
    assert got["expert_balancedness_report_mode"].startswith("warning: the prometheus report needs enable_metrics")


def test_eagle_steps_topk_and_draft_tokens_are_set_together_or_not_at_all() -> None:
    """0.5.23 arg_groups/speculative_hook.py _handle_eagle_family: with speculative_num_steps unset it picks all
    three itself and asserts topk and draft tokens are unset; with steps set it compares the topk with 1 (an unset
    one fails); NEXTN is EAGLE there (_resolve_speculative_algorithm_alias)."""
    got = _issues(speculative_algorithm="EAGLE3", speculative_draft_model_path="/d", speculative_eagle_topk=1)
    assert got["speculative_eagle_topk"].startswith("error: set without speculative_num_steps")
    got = _issues(speculative_algorithm="NEXTN", speculative_num_draft_tokens=4)
    assert got["speculative_num_draft_tokens"].startswith("error: set without speculative_num_steps")
    got = _issues(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_num_draft_tokens=4)
    assert got["speculative_eagle_topk"].startswith("error: unset while speculative_num_steps is set")
    none_set = _issues(speculative_algorithm="EAGLE3", speculative_draft_model_path="/d", max_running_requests=64)
    assert not any(v.startswith("error") for v in none_set.values()), none_set  # SGLang chooses them all
    adaptive = _issues(speculative_algorithm="EAGLE3", speculative_draft_model_path="/d", speculative_eagle_topk=1,
                       extra_args=["--speculative-adaptive"])
    assert "speculative_eagle_topk" not in adaptive  # the adaptive controller sets what is missing


def test_eagle_chain_draft_tokens_are_steps_plus_one() -> None:
    """0.5.23 _handle_eagle_family: with speculative_eagle_topk == 1, speculative_num_draft_tokens 'is adjusted to
    speculative_num_steps + 1' (a warning, the server starts)."""
    got = _issues(speculative_algorithm="EAGLE3", speculative_draft_model_path="/d", speculative_num_steps=3,
                  speculative_eagle_topk=1, speculative_num_draft_tokens=8)
    assert got["speculative_num_draft_tokens"] == ("warning: 8 with speculative_eagle_topk 1: SGLang adjusts it to "
                                                   "speculative_num_steps + 1 = 4")
    tree = _issues(speculative_algorithm="EAGLE3", speculative_draft_model_path="/d", speculative_num_steps=3,
                   speculative_eagle_topk=4, speculative_num_draft_tokens=8)
    assert "speculative_num_draft_tokens" not in tree  # a tree (topk > 1) verifies any number of tokens


def test_eagle_refusals_standalone_with_dp_attention_and_a_tree_on_trtllm_mha() -> None:
    """0.5.23 _handle_eagle_family: 'standalone speculative decoding does not support dp attention' and
    'trtllm_mha backend only supports topk = 1 for speculative decoding' both raise."""
    got = _issues(speculative_algorithm="STANDALONE", speculative_draft_model_path="/d", enable_dp_attention=True,
                  dp_size=8)
    assert got["enable_dp_attention"].startswith("error: STANDALONE speculative decoding does not support DP attention")
    got = _issues(speculative_algorithm="EAGLE3", speculative_draft_model_path="/d", speculative_num_steps=3,
                  speculative_eagle_topk=4, speculative_num_draft_tokens=8, attention_backend="trtllm_mha")
    assert got["speculative_eagle_topk"].startswith("error: trtllm_mha backend only supports topk = 1")


def test_a_drafter_without_max_running_requests_is_capped_at_48() -> None:
    """0.5.23 _handle_eagle_family and _handle_dflash: an unset max_running_requests 'is reset to 48 for
    speculative decoding', so a sweep beyond C=48 queues."""
    got = _issues(speculative_algorithm="DFLASH", speculative_draft_model_path="/d")
    assert got["max_running_requests"].startswith("warning: unset: with DFLASH SGLang resets it to 48")
    assert "max_running_requests" not in _issues(speculative_algorithm="DFLASH", speculative_draft_model_path="/d",
                                                 max_running_requests=256)
    assert "max_running_requests" not in _issues(speculative_algorithm="NGRAM")  # NGRAM keeps its own default


def test_dflash_with_dp_attention_on_one_dp_rank_is_no_dp_attention() -> None:
    """0.5.23 _handle_dflash checks runtime_context.py attn_dp_enabled_of (attn_dp_size > 1): dp_size 1 is no DP."""
    got = _issues(speculative_algorithm="DFLASH", speculative_draft_model_path="/d", enable_dp_attention=True)
    assert got["enable_dp_attention"].startswith("warning: ignored by SGLang when dp_size is 1")


def test_a_heatmap_interval_sglang_reads_as_zero_and_one_without_metrics() -> None:
    """0.5.23 eplb/expert_distribution.py _handle_metric_eplb_heatmap reads the interval with utils/common.py
    get_int_env_var (not an integer: 0, and <= 0 is off); the histogram is served on /metrics only."""
    got = _issues(env={"SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL": "ten"}, expert_balancedness_report_mode="both",
                  enable_metrics=True)
    assert got["env.SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL"].startswith("warning: 'ten': SGLang reads it as 0, which leaves the heatmap off")
    got = _issues(env={"SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL": "10"}, expert_balancedness_report_mode="server_log")
    assert "needs enable_metrics" in got["env.SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL"]
    ok = _issues(env={"SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL": "10"}, expert_balancedness_report_mode="server_log",
                 enable_metrics=True)
    assert "env.SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL" not in ok  # server_log mode still runs the recorder
    assert not any("env." in f for f in _issues(env={"SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL": "0"}))  # off, said so
    got = _issues(env={"SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL": "-5"})
    assert got["env.SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL"].startswith("warning: '-5': SGLang reads it as -5, which")


def test_the_seed_reporting_profiles_lint_clean(profile_env: ProfileDirs) -> None:
    """tp8's custom labels (0.5.23 arg_groups/validation_hook.py: the header defaults to x-custom-labels, so the
    labels are allowed) and ep8-eplb / ep8-v2's balancedness report and heatmap draw no issue of their own."""
    for name in ("tp8", "ep8-eplb", "ep8-v2"):
        fields = {i.field for i in lint_profile(load_profile(name))}
        assert fields <= {"num_continuous_decode_steps"}, (name, fields)


def test_errors_name_the_file_and_line(profile_env: ProfileDirs, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Like the other rules: ``profiles lint`` prints FILE:LINE for a knob the profile sets (loader.locate_field)."""
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(profile_env.tmp / "state"))
    path = write_profile(profile_env.local, "bad-dflash", 'name = "bad-dflash"\nextends = "ep8-tuned"\n'
                         'speculative_algorithm = "DFLASH"\nspeculative_draft_model_path = "/d"\n'
                         "speculative_dflash_block_size = 16\nspeculative_num_draft_tokens = 8\n")
    assert main(["profiles", "lint", "bad-dflash"]) == 1
    captured = capsys.readouterr()
    out = (captured.out + captured.err).replace("\n", "")
    assert f"profiles/{path.name}:5: error: speculative_dflash_block_size: 16 differs from speculative_num_draft_tokens 8" in out
