"""Lint rules for speculative decoding and the reporting knobs, each following SGLang 0.5.23's own check."""

from __future__ import annotations

from kimitui.profiles import Profile, lint_profile, load_profile
from tests.support.profiles import ProfileDirs, profile_env  # noqa: F401


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
