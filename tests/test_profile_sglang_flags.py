"""Every typed knob renders a flag SGLang 0.5.23 knows, and reads back under SGLang's name (issue 31).

The real parser (0.5.23's dumped options, ``kimitui/sglang/flags``) refused two flags kimitui rendered:
``--cuda-graph-max-bs`` (ambiguous since SGLang split it into ``-decode``/``-prefill``) and
``--enable-expert-distribution-metrics`` (gone; the real 0.5.18 parser names
``--expert-balancedness-report-mode`` instead).
"""

from __future__ import annotations

from kimitui.profiles import Profile, lint_profile
from kimitui.profiles.render import knob_args
from kimitui.profiles.schema import DEPLOY_FIELDS, LAUNCH_KNOBS
from kimitui.sglang.flag_check import FlagSpec, known_flags, refusal
from kimitui.sglang.knob_names import knob_flag, server_info_keys
from kimitui.sglang.server_info import server_drift

NEVER_RENDERED = {"extra_args", "env", "enable_expert_distribution_metrics", "enable_ep_moe", "enable_deepep_moe"}
"""Not flags: the free-form fields, the old expert-metrics switch (read as the report mode), and two flags
SGLang removed (kept only so the lint can say so)."""


def _flags():
    flags = known_flags("0.5.23")
    assert flags is not None
    return flags


def test_every_typed_knob_renders_a_flag_0_5_23_knows_exactly() -> None:
    flags = _flags()
    for knob in LAUNCH_KNOBS:
        if knob in DEPLOY_FIELDS or knob in NEVER_RENDERED:
            continue
        spec = flags.resolve(knob_flag(knob))
        assert isinstance(spec, FlagSpec) and knob_flag(knob) in spec.names, (knob, spec)


def test_cuda_graph_max_bs_is_the_decode_graphs_flag() -> None:
    p = Profile(name="t", model_path="/m", cuda_graph_max_bs=96)
    args = knob_args(p)
    assert args[args.index("--cuda-graph-max-bs-decode") + 1] == "96"
    assert refusal(_flags(), args) == ""
    assert server_info_keys("cuda_graph_max_bs") == ("cuda_graph_max_bs_decode", "cuda_graph_max_bs")
    assert server_info_keys("tp_size") == ("tp_size",)


def test_the_old_expert_metrics_switch_renders_the_report_mode_0_5_23_takes() -> None:
    """``enable_expert_distribution_metrics`` meant balancedness in the log and in Prometheus: ``both``, with
    the recorder in ``stat`` mode (the flags the real MoE server ran with)."""
    old = Profile(name="t", model_path="/m", tp_size=2, ep_size=2, enable_expert_distribution_metrics=True)
    args = knob_args(old)
    assert "--enable-expert-distribution-metrics" not in args
    assert args[args.index("--expert-balancedness-report-mode") + 1] == "both"
    assert args[args.index("--expert-distribution-recorder-mode") + 1] == "stat"
    assert refusal(_flags(), args) == ""
    assert not [i for i in lint_profile(old) if "is not a flag of SGLang" in i.message]
    # an explicit report mode wins; "off" turns nothing on
    chosen = Profile(name="t", model_path="/m", enable_expert_distribution_metrics=True,
                     expert_balancedness_report_mode="server_log")
    assert (chosen.expert_balancedness_report_mode, chosen.expert_distribution_recorder_mode) == ("server_log", "stat")
    off = Profile(name="t", model_path="/m", enable_expert_distribution_metrics=True, expert_balancedness_report_mode="off")
    assert (off.expert_balancedness_report_mode, off.expert_distribution_recorder_mode) == ("off", None)


def test_drift_reads_the_graph_size_under_sglang_s_name_then_the_old_one() -> None:
    meant = {"cuda_graph_max_bs": 128}
    launched = {"launch_command": "--model-path /m --cuda-graph-max-bs-decode 128", "cuda_graph_max_bs_decode": 128}
    assert server_drift(launched, meant) == {}
    assert server_drift({"launch_command": "--model-path /m", "cuda_graph_max_bs_decode": None}, meant) == {
        "cuda_graph_max_bs": [128, None]}  # a 0.5.23 server started without the flag
    assert server_drift({"cuda_graph_max_bs_decode": 64}, meant) == {"cuda_graph_max_bs": [128, 64]}
    assert server_drift({"internal_states": [{"cuda_graph_max_bs": 160}]}, meant) == {
        "cuda_graph_max_bs": [128, 160]}  # an SGLang from before the split
